/**
 * `meta.k8s.io/v1` Table output for `kubectl get` ("Receiving resources as Tables" in
 * https://kubernetes.io/docs/reference/using-api/api-concepts/): server-side printer columns for
 * the built-ins kubectl users look at, CRD `additionalPrinterColumns`, and `Name`/`Age` otherwise.
 * Rows carry the object as PartialObjectMetadata so `--show-labels`, `-L` and `-A` work, or the
 * whole object with `includeObject=Object` (what kubectl asks for with `--sort-by`).
 *
 * @module
 */
import { isObject, type JsonObject } from "./json_value.ts";
import { groupVersion, type PrinterColumn, type ResourceType } from "./resources.ts";
import { badRequest } from "./status_errors.ts";

/** A column definition of a Table. */
export interface TableColumn {
  /** Header. */
  readonly name: string;
  /** Cell type. */
  readonly type: string;
  /** `name` for the name column. */
  readonly format: string;
  /** Help text. */
  readonly description: string;
  /** 0 = default, >0 = only with `-o wide`. */
  readonly priority: number;
}

/** kubectl's HumanDuration: `0s`, `2m3s`, `5m`, `3h20m`, `4d`… */
export function humanAge(fromIso: unknown, now: number): string {
  if (typeof fromIso !== "string") return "<unknown>";
  const s = Math.max(0, Math.floor((now - Date.parse(fromIso)) / 1000));
  const m = Math.floor(s / 60);
  const h = Math.floor(m / 60);
  const d = Math.floor(h / 24);
  if (s < 120) return `${s}s`;
  if (m < 10) return s % 60 === 0 ? `${m}m` : `${m}m${s % 60}s`;
  if (h < 3) return `${m}m`;
  if (h < 8) return m % 60 === 0 ? `${h}h` : `${h}h${m % 60}m`;
  if (h < 48) return `${h}h`;
  if (d < 8) return h % 24 === 0 ? `${d}d` : `${d}d${h % 24}h`;
  if (d < 730) return `${d}d`;
  return `${Math.floor(d / 365)}y`;
}

/** Evaluate a simple JSONPath such as `.spec.nodeName` or `.status.conditions[0].type`. */
export function simpleJsonPath(obj: unknown, path: string): unknown {
  let cur = obj;
  const segs = path.replace(/^\{?\.?/, "").replace(/\}$/, "").split(".").filter((s) => s);
  for (const seg of segs) {
    const m = /^([^[]*)((?:\[\d+\])*)$/.exec(seg);
    if (!m) return undefined;
    if (m[1]) cur = isObject(cur) ? cur[m[1]] : undefined;
    for (const idx of m[2]!.match(/\d+/g) ?? []) {
      cur = Array.isArray(cur) ? cur[Number(idx)] : undefined;
    }
    if (cur === undefined) return undefined;
  }
  return cur;
}

function col(name: string, type = "string", priority = 0, description = ""): TableColumn {
  return { name, type, format: name === "Name" ? "name" : "", description, priority };
}

type Row = (o: JsonObject, now: number) => unknown[];

const ACCESS_MODES: Readonly<Record<string, string>> = {
  ReadWriteOnce: "RWO",
  ReadOnlyMany: "ROX",
  ReadWriteMany: "RWX",
  ReadWriteOncePod: "RWOP",
};

function accessMode(mode: string): string {
  return ACCESS_MODES[mode] ?? mode;
}

function podRow(o: JsonObject, now: number): unknown[] {
  const spec = (o.spec ?? {}) as JsonObject;
  const status = (o.status ?? {}) as JsonObject;
  const m = (o.metadata ?? {}) as JsonObject;
  const containers = (spec.containers ?? []) as unknown[];
  const statuses = (status.containerStatuses ?? []) as JsonObject[];
  const ready = statuses.filter((s) => s.ready).length;
  const restarts = statuses.reduce((n, s) => n + Number(s.restartCount ?? 0), 0);
  let phase = String(status.reason ?? status.phase ?? "Pending");
  for (const s of statuses) {
    const state = (s.state ?? {}) as JsonObject;
    const reason = ((state.waiting ?? state.terminated) as JsonObject | undefined)?.reason;
    if (reason && phase !== "Succeeded") phase = String(reason);
  }
  if (m.deletionTimestamp) phase = "Terminating";
  const podIP = String(status.podIP ?? "<none>");
  return [
    m.name,
    `${ready}/${containers.length}`,
    phase,
    String(restarts),
    humanAge(m.creationTimestamp, now),
    podIP,
    spec.nodeName ?? "<none>",
    status.nominatedNodeName ?? "<none>",
    "<none>",
  ];
}

const BUILTIN_TABLES: Readonly<Record<string, { columns: TableColumn[]; row: Row }>> = {
  "/pods": {
    columns: [
      col("Name"),
      col("Ready"),
      col("Status"),
      col("Restarts", "string"),
      col("Age"),
      col("IP", "string", 1),
      col("Node", "string", 1),
      col("Nominated Node", "string", 1),
      col("Readiness Gates", "string", 1),
    ],
    row: podRow,
  },
  "/namespaces": {
    columns: [col("Name"), col("Status"), col("Age")],
    row: (o, now) => [
      (o.metadata as JsonObject).name,
      (o.status as JsonObject | undefined)?.phase ?? "Active",
      humanAge((o.metadata as JsonObject).creationTimestamp, now),
    ],
  },
  "/configmaps": {
    columns: [col("Name"), col("Data", "integer"), col("Age")],
    row: (o, now) => [
      (o.metadata as JsonObject).name,
      Object.keys((o.data ?? {}) as JsonObject).length +
      Object.keys((o.binaryData ?? {}) as JsonObject).length,
      humanAge((o.metadata as JsonObject).creationTimestamp, now),
    ],
  },
  "/nodes": {
    columns: [col("Name"), col("Status"), col("Roles"), col("Age"), col("Version")],
    row: (o, now) => {
      const conds = ((o.status as JsonObject | undefined)?.conditions ?? []) as JsonObject[];
      const ready = conds.find((c) => c.type === "Ready")?.status === "True";
      return [
        (o.metadata as JsonObject).name,
        ready ? "Ready" : "NotReady",
        "<none>",
        humanAge((o.metadata as JsonObject).creationTimestamp, now),
        ((o.status as JsonObject | undefined)?.nodeInfo as JsonObject | undefined)
          ?.kubeletVersion ?? "",
      ];
    },
  },
  "/events": {
    columns: [
      col("Last Seen"),
      col("Type"),
      col("Reason"),
      col("Object"),
      col("Message"),
      col("Source", "string", 1),
      col("Count", "string", 1),
    ],
    row: (o, now) => {
      const inv = (o.involvedObject ?? {}) as JsonObject;
      const m = o.metadata as JsonObject;
      const last = o.lastTimestamp ?? o.eventTime ?? m.creationTimestamp;
      return [
        humanAge(last, now),
        o.type ?? "",
        o.reason ?? "",
        `${String(inv.kind ?? "").toLowerCase()}/${inv.name ?? ""}`,
        o.message ?? "",
        ((o.source ?? {}) as JsonObject).component ?? o.reportingComponent ?? "",
        String(o.count ?? 1),
      ];
    },
  },
  "/persistentvolumes": {
    columns: [
      col("Name"),
      col("Capacity"),
      col("Access Modes"),
      col("Reclaim Policy"),
      col("Status"),
      col("Claim"),
      col("StorageClass"),
      col("Age"),
    ],
    row: (o, now) => {
      const spec = (o.spec ?? {}) as JsonObject;
      const claim = (spec.claimRef ?? {}) as JsonObject;
      return [
        (o.metadata as JsonObject).name,
        ((spec.capacity ?? {}) as JsonObject).storage ?? "",
        ((spec.accessModes ?? []) as string[]).map(accessMode).join(","),
        spec.persistentVolumeReclaimPolicy ?? "",
        ((o.status ?? {}) as JsonObject).phase ?? "",
        claim.name ? `${claim.namespace}/${claim.name}` : "",
        spec.storageClassName ?? "",
        humanAge((o.metadata as JsonObject).creationTimestamp, now),
      ];
    },
  },
  "/persistentvolumeclaims": {
    columns: [
      col("Name"),
      col("Status"),
      col("Volume"),
      col("Capacity"),
      col("Access Modes"),
      col("StorageClass"),
      col("Age"),
    ],
    row: (o, now) => {
      const spec = (o.spec ?? {}) as JsonObject;
      const status = (o.status ?? {}) as JsonObject;
      return [
        (o.metadata as JsonObject).name,
        status.phase ?? "Pending",
        spec.volumeName ?? "",
        ((status.capacity ?? {}) as JsonObject).storage ?? "",
        ((status.accessModes ?? []) as string[]).map(accessMode).join(","),
        spec.storageClassName ?? "",
        humanAge((o.metadata as JsonObject).creationTimestamp, now),
      ];
    },
  },
  "coordination.k8s.io/leases": {
    columns: [col("Name"), col("Holder"), col("Age")],
    row: (o, now) => [
      (o.metadata as JsonObject).name,
      ((o.spec ?? {}) as JsonObject).holderIdentity ?? "",
      humanAge((o.metadata as JsonObject).creationTimestamp, now),
    ],
  },
  "apps/deployments": {
    columns: [
      col("Name"),
      col("Ready"),
      col("Up-to-date", "integer"),
      col("Available", "integer"),
      col("Age"),
    ],
    row: (o, now) => {
      const s = (o.status ?? {}) as JsonObject;
      const replicas = (o.spec as JsonObject | undefined)?.replicas ?? 1;
      return [
        (o.metadata as JsonObject).name,
        `${s.readyReplicas ?? 0}/${replicas}`,
        s.updatedReplicas ?? 0,
        s.availableReplicas ?? 0,
        humanAge((o.metadata as JsonObject).creationTimestamp, now),
      ];
    },
  },
};

function crdColumns(columns: readonly PrinterColumn[]): { columns: TableColumn[]; row: Row } {
  const defs = [
    col("Name", "string", 0, "Name must be unique within a namespace."),
    ...columns.map((c) =>
      col(
        c.name,
        c.type,
        c.priority ?? 0,
        c.description ?? `Custom resource definition column (in JSONPath format): ${c.jsonPath}`,
      )
    ),
  ];
  return {
    columns: defs,
    row: (o, now) => [
      (o.metadata as JsonObject).name,
      ...columns.map((c) => {
        const v = simpleJsonPath(o, c.jsonPath);
        if (c.type === "date") return v === undefined ? "<unknown>" : humanAge(v, now);
        if (v === undefined || v === null) return null;
        return isObject(v) || Array.isArray(v) ? JSON.stringify(v) : v;
      }),
    ],
  };
}

function tableSpec(t: ResourceType): { columns: TableColumn[]; row: Row } {
  if (t.custom && t.printerColumns && t.printerColumns.length) return crdColumns(t.printerColumns);
  const builtin = BUILTIN_TABLES[`${t.group}/${t.plural}`];
  if (builtin) return builtin;
  return crdColumns([{ name: "Age", type: "date", jsonPath: ".metadata.creationTimestamp" }]);
}

function partial(o: JsonObject): JsonObject {
  return { kind: "PartialObjectMetadata", apiVersion: "meta.k8s.io/v1", metadata: o.metadata };
}

/**
 * What each row carries (`includeObject`): `Metadata` (default) a PartialObjectMetadata, `Object`
 * the whole object (kubectl asks for it with `--sort-by`, to sort on any field), `None` nothing.
 */
export type IncludeObject = "None" | "Metadata" | "Object";

/** The `includeObject` query parameter. @throws {ApiError} 400 for another value */
export function includeObjectOf(q: URLSearchParams): IncludeObject {
  const v = q.get("includeObject") ?? "Metadata";
  if (v === "" || v === "Metadata") return "Metadata";
  if (v === "None" || v === "Object") return v;
  throw badRequest(
    `Invalid value: "${v}": includeObject must be one of "None", "Metadata" or "Object"`,
  );
}

/** A Table of `items`; `withColumns=false` omits column definitions (later watch events). */
export function toTable(
  t: ResourceType,
  items: readonly JsonObject[],
  listMeta: JsonObject,
  options: { now: number; withColumns?: boolean; includeObject?: IncludeObject },
): JsonObject {
  const spec = tableSpec(t);
  const table: JsonObject = { kind: "Table", apiVersion: "meta.k8s.io/v1", metadata: listMeta };
  if (options.withColumns !== false) table.columnDefinitions = spec.columns;
  else table.columnDefinitions = null;
  const include = options.includeObject ?? "Metadata";
  const embed = (o: JsonObject): JsonObject | null =>
    include === "None"
      ? null
      : include === "Object"
      ? { ...o, kind: t.kind, apiVersion: groupVersion(t) }
      : partial(o);
  table.rows = items.map((o) => ({ cells: spec.row(o, options.now), object: embed(o) }));
  return table;
}

/** Whether an Accept header asks for a Table. */
export function wantsTable(accept: string | null): boolean {
  return !!accept && /as=Table/.test(accept) && /g=meta\.k8s\.io/.test(accept);
}
