/**
 * Per-kind defaulting and validation of built-in objects — only the rules our driver and its
 * tests can observe (pod defaults, names, MicroTime fields, events, CRD names, pod immutability).
 * Custom resources are validated against their schema in `schema_validate.ts` instead.
 *
 * @module
 */
import { isObject, type JsonObject } from "./json_value.ts";
import type { ResourceType } from "./resources.ts";
import { badRequest, type StatusCause } from "./status_errors.ts";

const SUBDOMAIN_REGEXP = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const LABEL_REGEXP = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const MICRO_TIME_REGEXP = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}(Z|[+-]\d{2}:\d{2})$/;
/** Kinds whose names may contain `:` (RBAC) and need only be path segments. */
const PATH_SEGMENT_NAME_KINDS: ReadonlySet<string> = new Set([
  "ClusterRole",
  "ClusterRoleBinding",
  "Role",
  "RoleBinding",
]);

/** Validate `metadata.name` of a new object. */
export function validateName(t: ResourceType, name: string): StatusCause[] {
  if (PATH_SEGMENT_NAME_KINDS.has(t.kind)) {
    return name.includes("/") || name === "." || name === ".."
      ? [{
        reason: "FieldValueInvalid",
        message: `Invalid value: "${name}": may not contain '/'`,
        field: "metadata.name",
      }]
      : [];
  }
  if (t.kind === "Namespace") {
    return LABEL_REGEXP.test(name) && name.length <= 63 ? [] : [{
      reason: "FieldValueInvalid",
      message:
        `Invalid value: "${name}": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')`,
      field: "metadata.name",
    }];
  }
  return SUBDOMAIN_REGEXP.test(name) && name.length <= 253 ? [] : [{
    reason: "FieldValueInvalid",
    message:
      `Invalid value: "${name}": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`,
    field: "metadata.name",
  }];
}

function checkMicroTime(kind: string, value: unknown): void {
  if (value === undefined || value === null) return;
  if (typeof value !== "string" || !MICRO_TIME_REGEXP.test(value)) {
    const frac = typeof value === "string"
      ? (/T\d{2}:\d{2}:\d{2}(.*)$/.exec(value)?.[1] ?? value)
      : String(value);
    throw badRequest(
      `${kind} in version "v1" cannot be handled as a ${kind}: parsing time "${value}" as "2006-01-02T15:04:05.000000Z07:00": cannot parse "${frac}" as ".000000"`,
    );
  }
}

/**
 * Reject MicroTime fields without exactly 6 fractional digits (Lease `acquireTime`/`renewTime`,
 * Event `eventTime`) with the real server's 400.
 */
export function checkMicroTimes(t: ResourceType, obj: JsonObject): void {
  if (t.kind === "Lease" && isObject(obj.spec)) {
    checkMicroTime("Lease", obj.spec.acquireTime);
    checkMicroTime("Lease", obj.spec.renewTime);
  }
  if (t.kind === "Event") checkMicroTime("Event", obj.eventTime);
}

function podDefaults(pod: JsonObject): void {
  const spec = (isObject(pod.spec) ? pod.spec : pod.spec = {}) as JsonObject;
  spec.restartPolicy ??= "Always";
  spec.terminationGracePeriodSeconds ??= 30;
  spec.dnsPolicy ??= "ClusterFirst";
  spec.serviceAccountName ??= "default";
  spec.serviceAccount ??= spec.serviceAccountName;
  spec.schedulerName ??= "default-scheduler";
  spec.securityContext ??= {};
  spec.enableServiceLinks ??= true;
  spec.priority ??= 0;
  spec.preemptionPolicy ??= "PreemptLowerPriority";
  for (
    const c of [
      ...(spec.containers ?? []) as JsonObject[],
      ...(spec.initContainers ?? []) as JsonObject[],
    ]
  ) {
    if (!isObject(c)) continue;
    c.terminationMessagePath ??= "/dev/termination-log";
    c.terminationMessagePolicy ??= "File";
    const image = String(c.image ?? "");
    c.imagePullPolicy ??= image.includes(":") && !image.endsWith(":latest")
      ? "IfNotPresent"
      : "Always";
    c.resources ??= {};
  }
  pod.status = { phase: "Pending", qosClass: "BestEffort" };
}

/**
 * Secrets: `stringData` is write-only convenience; kube-apiserver merges it into `data` (base64,
 * `stringData` wins) and never stores it.
 */
export function foldSecretStringData(secret: JsonObject): void {
  if (!isObject(secret.stringData)) return;
  const data: JsonObject = isObject(secret.data) ? { ...secret.data } : {};
  for (const [k, v] of Object.entries(secret.stringData)) {
    const bytes = new TextEncoder().encode(String(v));
    data[k] = btoa(Array.from(bytes, (b) => String.fromCharCode(b)).join(""));
  }
  secret.data = data;
  delete secret.stringData;
}

/** Apply create-time defaults of built-ins (pods, namespaces, CRD status). */
export function defaultOnCreate(t: ResourceType, obj: JsonObject): void {
  if (t.custom) return;
  switch (`${t.group}/${t.kind}`) {
    case "/Pod":
      podDefaults(obj);
      break;
    case "/Namespace":
      obj.spec = { finalizers: ["kubernetes"], ...(isObject(obj.spec) ? obj.spec : {}) };
      obj.status = { phase: "Active" };
      break;
    case "/Secret":
      obj.type ??= "Opaque";
      break;
    case "/PersistentVolume": {
      const spec = (isObject(obj.spec) ? obj.spec : obj.spec = {}) as JsonObject;
      spec.persistentVolumeReclaimPolicy ??= "Retain";
      spec.volumeMode ??= "Filesystem";
      obj.status = { phase: "Pending" };
      break;
    }
    case "/PersistentVolumeClaim": {
      const spec = (isObject(obj.spec) ? obj.spec : obj.spec = {}) as JsonObject;
      spec.volumeMode ??= "Filesystem";
      obj.status = { phase: "Pending" };
      break;
    }
    case "apps/Deployment":
    case "apps/DaemonSet": {
      const spec = (isObject(obj.spec) ? obj.spec : obj.spec = {}) as JsonObject;
      if (t.kind === "Deployment") spec.replicas ??= 1;
      spec.revisionHistoryLimit ??= 10;
      break;
    }
  }
}

/** Built-in validation of a create (`old` undefined) or update. */
export function validateBuiltin(t: ResourceType, obj: JsonObject, old?: JsonObject): StatusCause[] {
  const causes: StatusCause[] = [];
  const meta = (obj.metadata ?? {}) as JsonObject;
  if (t.kind === "Pod") {
    const names = (o: JsonObject | undefined) =>
      (((o?.spec as JsonObject | undefined)?.containers ?? []) as JsonObject[]).map((c) =>
        String(c.name)
      ).sort()
        .join(",");
    if (!old && names(obj) === "") {
      causes.push({
        reason: "FieldValueRequired",
        message: "Required value",
        field: "spec.containers",
      });
    }
    if (old && names(obj) !== names(old)) {
      causes.push({
        reason: "FieldValueForbidden",
        message: "Forbidden: pod updates may not add or remove containers",
        field: "spec.containers",
      });
    }
  }
  if (t.group === "" && t.kind === "Event" && isObject(obj.involvedObject)) {
    const ns = obj.involvedObject.namespace;
    if (ns && ns !== meta.namespace) {
      causes.push({
        reason: "FieldValueInvalid",
        message: `Invalid value: "${ns}": does not match event.namespace`,
        field: "involvedObject.namespace",
      });
    }
  }
  if (t.group === "events.k8s.io" && !old) {
    // Stored in the core/v1 shape, where reportingController is named reportingComponent.
    const storedName: Record<string, string> = { reportingController: "reportingComponent" };
    for (const f of ["reportingController", "reportingInstance", "action", "reason"]) {
      if (!obj[storedName[f] ?? f]) {
        causes.push({ reason: "FieldValueRequired", message: "Required value", field: f });
      }
    }
    if (obj.type !== "Normal" && obj.type !== "Warning") {
      causes.push({
        reason: "FieldValueInvalid",
        message: `Invalid value: "${obj.type ?? ""}": has invalid value: ${obj.type ?? ""}`,
        field: "type",
      });
    }
  }
  if (t.kind === "CustomResourceDefinition") {
    const spec = (obj.spec ?? {}) as JsonObject;
    const names = (spec.names ?? {}) as JsonObject;
    const want = `${names.plural}.${spec.group}`;
    if (meta.name !== want) {
      causes.push({
        reason: "FieldValueInvalid",
        message: `Invalid value: "${meta.name}": must be spec.names.plural+"."+spec.group`,
        field: "metadata.name",
      });
    }
  }
  return causes;
}
