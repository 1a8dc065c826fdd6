/**
 * Registry of the resource types the emulator serves: the built-ins the driver and its tests use,
 * plus one entry per established CustomResourceDefinition. Discovery, OpenAPI, routing and
 * validation all read from here.
 *
 * @module
 */

/** Verbs of a full CRUD resource, in the order the real server lists them. */
export const ALL_VERBS: readonly string[] = [
  "create",
  "delete",
  "deletecollection",
  "get",
  "list",
  "patch",
  "update",
  "watch",
];

/** Printer column of a custom resource (`additionalPrinterColumns`). */
export interface PrinterColumn {
  /** Column header. */
  readonly name: string;
  /** `string`, `integer`, `number`, `boolean` or `date`. */
  readonly type: string;
  /** Simple JSONPath such as `.spec.nodeName`. */
  readonly jsonPath: string;
  /** Help text. */
  readonly description?: string;
  /** 0 = always shown, >0 = `-o wide`. */
  readonly priority?: number;
}

/** Everything the emulator knows about one served resource. */
export interface ResourceType {
  /** API group, "" for core. */
  readonly group: string;
  /** API version, e.g. `v1`. */
  readonly version: string;
  /** Plural resource name (URL segment). */
  readonly plural: string;
  /** Singular name. */
  readonly singular: string;
  /** Kind. */
  readonly kind: string;
  /** List kind, e.g. `PodList`. */
  readonly listKind: string;
  /** Namespaced or cluster scoped. */
  readonly namespaced: boolean;
  /** kubectl short names. */
  readonly shortNames: readonly string[];
  /** Categories such as `all`. */
  readonly categories: readonly string[];
  /** Supported verbs. */
  readonly verbs: readonly string[];
  /** Whether `/status` is a subresource (status changes on the main endpoint are ignored). */
  readonly statusSubresource: boolean;
  /** Whether `metadata.generation` is maintained. */
  readonly generation: boolean;
  /** Whether PUT on a missing object creates it (leases, events, RBAC…). */
  readonly createOnUpdate: boolean;
  /** Field selector labels accepted besides metadata.name/namespace (path = label). */
  readonly selectableFields: readonly string[];
  /** Custom resource: OpenAPI v3 schema of the served version. */
  readonly schema?: Record<string, unknown>;
  /** Custom resource: printer columns. */
  readonly printerColumns?: readonly PrinterColumn[];
  /** True for custom resources (items carry kind/apiVersion, SMP is 415, schema validation). */
  readonly custom: boolean;
  /** Storage key shared by types that alias the same objects (core and events.k8s.io events). */
  readonly storageKey?: string;
}

/** `group/version` string, or `version` for core. */
export function groupVersion(t: Pick<ResourceType, "group" | "version">): string {
  return t.group ? `${t.group}/${t.version}` : t.version;
}

/** Key under which objects of this type are stored (group/plural). */
export function storageKey(t: ResourceType): string {
  return t.storageKey ?? `${t.group}/${t.plural}`;
}

interface BuiltinSpec {
  readonly gv: string;
  readonly plural: string;
  readonly kind: string;
  readonly namespaced: boolean;
  readonly shortNames?: readonly string[];
  readonly categories?: readonly string[];
  readonly status?: boolean;
  readonly generation?: boolean;
  readonly createOnUpdate?: boolean;
  readonly fields?: readonly string[];
  readonly storageKey?: string;
}

const POD_FIELDS = [
  "spec.nodeName",
  "spec.restartPolicy",
  "spec.schedulerName",
  "spec.serviceAccountName",
  "spec.hostNetwork",
  "status.phase",
  "status.podIP",
  "status.nominatedNodeName",
];
const EVENT_FIELDS = [
  "involvedObject.kind",
  "involvedObject.namespace",
  "involvedObject.name",
  "involvedObject.uid",
  "involvedObject.apiVersion",
  "involvedObject.resourceVersion",
  "involvedObject.fieldPath",
  "reason",
  "reportingComponent",
  "source",
  "type",
];

const BUILTINS: readonly BuiltinSpec[] = [
  { gv: "v1", plural: "configmaps", kind: "ConfigMap", namespaced: true, shortNames: ["cm"] },
  {
    gv: "v1",
    plural: "events",
    kind: "Event",
    namespaced: true,
    shortNames: ["ev"],
    createOnUpdate: true,
    fields: EVENT_FIELDS,
    storageKey: "events",
  },
  {
    gv: "v1",
    plural: "namespaces",
    kind: "Namespace",
    namespaced: false,
    shortNames: ["ns"],
    status: true,
    fields: ["status.phase"],
  },
  { gv: "v1", plural: "nodes", kind: "Node", namespaced: false, shortNames: ["no"], status: true },
  {
    gv: "v1",
    plural: "persistentvolumeclaims",
    kind: "PersistentVolumeClaim",
    namespaced: true,
    shortNames: ["pvc"],
    categories: ["all"],
    status: true,
  },
  {
    gv: "v1",
    plural: "persistentvolumes",
    kind: "PersistentVolume",
    namespaced: false,
    shortNames: ["pv"],
    status: true,
  },
  {
    gv: "v1",
    plural: "pods",
    kind: "Pod",
    namespaced: true,
    shortNames: ["po"],
    categories: ["all"],
    status: true,
    fields: POD_FIELDS,
  },
  { gv: "v1", plural: "secrets", kind: "Secret", namespaced: true, fields: ["type"] },
  {
    gv: "v1",
    plural: "serviceaccounts",
    kind: "ServiceAccount",
    namespaced: true,
    shortNames: ["sa"],
  },
  {
    gv: "v1",
    plural: "services",
    kind: "Service",
    namespaced: true,
    shortNames: ["svc"],
    categories: ["all"],
    status: true,
    createOnUpdate: true,
  },
  {
    gv: "apps/v1",
    plural: "daemonsets",
    kind: "DaemonSet",
    namespaced: true,
    shortNames: ["ds"],
    categories: ["all"],
    status: true,
    generation: true,
  },
  {
    gv: "apps/v1",
    plural: "deployments",
    kind: "Deployment",
    namespaced: true,
    shortNames: ["deploy"],
    categories: ["all"],
    status: true,
    generation: true,
  },
  {
    gv: "coordination.k8s.io/v1",
    plural: "leases",
    kind: "Lease",
    namespaced: true,
    createOnUpdate: true,
  },
  {
    gv: "events.k8s.io/v1",
    plural: "events",
    kind: "Event",
    namespaced: true,
    shortNames: ["ev"],
    createOnUpdate: true,
    storageKey: "events",
  },
  {
    gv: "storage.k8s.io/v1",
    plural: "storageclasses",
    kind: "StorageClass",
    namespaced: false,
    shortNames: ["sc"],
  },
  { gv: "storage.k8s.io/v1", plural: "csidrivers", kind: "CSIDriver", namespaced: false },
  { gv: "storage.k8s.io/v1", plural: "csinodes", kind: "CSINode", namespaced: false },
  ...["clusterroles", "clusterrolebindings", "roles", "rolebindings"].map((plural) => ({
    gv: "rbac.authorization.k8s.io/v1",
    plural,
    kind: {
      clusterroles: "ClusterRole",
      clusterrolebindings: "ClusterRoleBinding",
      roles: "Role",
      rolebindings: "RoleBinding",
    }[plural]!,
    namespaced: !plural.startsWith("cluster"),
    createOnUpdate: true,
  })),
  // Stored only: the emulator does not run admission policies (as it does not authorize).
  ...[
    ["validatingadmissionpolicies", "ValidatingAdmissionPolicy"],
    ["validatingadmissionpolicybindings", "ValidatingAdmissionPolicyBinding"],
  ].map(([plural, kind]) => ({
    gv: "admissionregistration.k8s.io/v1",
    plural: plural!,
    kind: kind!,
    namespaced: false,
  })),
  // Stored only: the emulator has no eviction subresource and no disruption controller.
  {
    gv: "policy/v1",
    plural: "poddisruptionbudgets",
    kind: "PodDisruptionBudget",
    namespaced: true,
    shortNames: ["pdb"],
    status: true,
    generation: true,
  },
  {
    gv: "scheduling.k8s.io/v1",
    plural: "priorityclasses",
    kind: "PriorityClass",
    namespaced: false,
    shortNames: ["pc"],
    generation: false,
  },
  {
    gv: "apiextensions.k8s.io/v1",
    plural: "customresourcedefinitions",
    kind: "CustomResourceDefinition",
    namespaced: false,
    shortNames: ["crd", "crds"],
    status: true,
    generation: true,
  },
];

function fromBuiltin(s: BuiltinSpec): ResourceType {
  const [group, version] = s.gv.includes("/") ? s.gv.split("/") as [string, string] : ["", s.gv];
  return {
    group,
    version,
    plural: s.plural,
    singular: s.kind.toLowerCase(),
    kind: s.kind,
    listKind: `${s.kind}List`,
    namespaced: s.namespaced,
    shortNames: s.shortNames ?? [],
    categories: s.categories ?? [],
    verbs: ALL_VERBS,
    statusSubresource: s.status ?? false,
    generation: s.generation ?? false,
    createOnUpdate: s.createOnUpdate ?? false,
    selectableFields: s.fields ?? [],
    custom: false,
    ...(s.storageKey ? { storageKey: s.storageKey } : {}),
  };
}

/** The built-in types, in a stable order. */
export const BUILTIN_TYPES: readonly ResourceType[] = BUILTINS.map(fromBuiltin);

/**
 * Derive the served type of a CRD object (its first served version). Returns undefined when the
 * CRD has no served version.
 */
export function typeFromCrd(crd: Record<string, unknown>): ResourceType | undefined {
  const spec = (crd.spec ?? {}) as Record<string, unknown>;
  const names = (spec.names ?? {}) as Record<string, unknown>;
  const versions = (spec.versions ?? []) as Record<string, unknown>[];
  const served = versions.find((v) => v.served !== false && v.storage) ??
    versions.find((v) => v.served !== false);
  if (!served) return undefined;
  const kind = String(names.kind ?? "");
  const subresources = (served.subresources ?? {}) as Record<string, unknown>;
  const schema = ((served.schema ?? {}) as Record<string, unknown>).openAPIV3Schema as
    | Record<string, unknown>
    | undefined;
  const selectable = ((served.selectableFields ?? []) as { jsonPath?: string }[])
    .map((f) => String(f.jsonPath ?? "").replace(/^\./, ""))
    .filter((f) => f);
  return {
    group: String(spec.group ?? ""),
    version: String(served.name ?? ""),
    plural: String(names.plural ?? ""),
    singular: String(names.singular ?? kind.toLowerCase()),
    kind,
    listKind: String(names.listKind ?? `${kind}List`),
    namespaced: spec.scope === "Namespaced",
    shortNames: (names.shortNames ?? []) as string[],
    categories: (names.categories ?? []) as string[],
    verbs: ["delete", "deletecollection", "get", "list", "patch", "create", "update", "watch"],
    statusSubresource: "status" in subresources,
    generation: true,
    createOnUpdate: false,
    selectableFields: selectable,
    ...(schema ? { schema } : {}),
    printerColumns: (served.additionalPrinterColumns ?? []) as PrinterColumn[],
    custom: true,
  };
}

/** Mutable set of served types: built-ins plus CRD-defined ones. */
export class ResourceRegistry {
  #types: ResourceType[] = [...BUILTIN_TYPES];

  /** All served types. */
  all(): readonly ResourceType[] {
    return this.#types;
  }

  /** Look up by group, version and plural. */
  find(group: string, version: string, plural: string): ResourceType | undefined {
    return this.#types.find((t) =>
      t.group === group && t.version === version && t.plural === plural
    );
  }

  /** Look up by apiVersion and kind (first match). */
  findKind(apiVersion: string, kind: string): ResourceType | undefined {
    return this.#types.find((t) => groupVersion(t) === apiVersion && t.kind === kind);
  }

  /** Whether any type is served under `group/version`. */
  hasGroupVersion(group: string, version: string): boolean {
    return this.#types.some((t) => t.group === group && t.version === version);
  }

  /** Add or replace a custom type. */
  register(t: ResourceType): void {
    this.unregister(t.group, t.plural);
    this.#types.push(t);
  }

  /** Remove a custom type by group and plural. */
  unregister(group: string, plural: string): void {
    this.#types = this.#types.filter((t) =>
      !(t.custom && t.group === group && t.plural === plural)
    );
  }

  /** Groups in discovery order (core excluded): group → versions. */
  groups(): Map<string, string[]> {
    const out = new Map<string, string[]>();
    for (const t of this.#types) {
      if (!t.group) continue;
      const versions = out.get(t.group) ?? [];
      if (!versions.includes(t.version)) versions.push(t.version);
      out.set(t.group, versions);
    }
    return out;
  }
}
