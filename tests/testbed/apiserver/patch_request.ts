/**
 * PATCH handling (JSON, merge, strategic merge and apply patches;
 * https://kubernetes.io/docs/reference/using-api/api-concepts/): decode the body by Content-Type,
 * apply it to the live object, and commit through {@link Cluster.commit}. Server-side apply may
 * create the object.
 *
 * @module
 */
import { parse as parseYaml } from "yaml";
import { serverSideApply } from "./apply.ts";
import type { Cluster, WriteOptions, WriteResult } from "./cluster.ts";
import { eventToCore } from "./event_convert.ts";
import { clone, isObject, type JsonObject, meta } from "./json_value.ts";
import { mergePatch } from "./patch_merge.ts";
import { jsonPatch, JsonPatchError } from "./patch_json.ts";
import { strategicMerge } from "./patch_strategic.ts";
import { groupVersion, type ResourceType, storageKey } from "./resources.ts";
import { ApiError, badRequest, invalid, notFound, unsupportedMediaType } from "./status_errors.ts";
import { kubeTime } from "../../../src/kube/time.ts";

/** The four patch media types. */
export const PATCH_TYPES = {
  json: "application/json-patch+json",
  merge: "application/merge-patch+json",
  strategic: "application/strategic-merge-patch+json",
  apply: "application/apply-patch+yaml",
} as const;

/** Inputs of {@link patchObject}. */
export interface PatchRequest {
  /** Target type. */
  readonly type: ResourceType;
  /** Namespace ("" for cluster scope). */
  readonly namespace: string;
  /** Object name. */
  readonly name: string;
  /** `status` or undefined. */
  readonly subresource?: string | undefined;
  /** Content-Type without parameters. */
  readonly contentType: string;
  /** Raw body text. */
  readonly body: string;
  /** `force` query parameter (apply only). */
  readonly force?: boolean | undefined;
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch (err) {
    throw badRequest(`error decoding patch: ${err instanceof Error ? err.message : String(err)}`);
  }
}

/** Apply a PATCH request. */
export function patchObject(cluster: Cluster, req: PatchRequest, w: WriteOptions): WriteResult {
  const t = req.type;
  const ct = req.contentType;
  if (!Object.values(PATCH_TYPES).includes(ct as typeof PATCH_TYPES.json)) {
    throw new ApiError(415, "UnsupportedMediaType", "415: Unsupported Media Type", {});
  }
  if (ct === PATCH_TYPES.strategic && t.custom) {
    throw unsupportedMediaType(
      "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml",
    );
  }
  if (req.force !== undefined && ct !== PATCH_TYPES.apply) {
    throw invalid("PatchOptions", "meta.k8s.io", "", [{
      reason: "FieldValueForbidden",
      message: "Forbidden: may not be specified for non-apply patch",
      field: "force",
    }]);
  }
  const ns = t.namespaced ? req.namespace : "";
  const raw = cluster.store.get(storageKey(t), ns, req.name);
  if (ct === PATCH_TYPES.apply) return applyPatch(cluster, req, raw, w);
  if (!raw) throw notFound({ resource: t.plural, group: t.group, name: req.name });
  const current = cluster.present(t, raw);
  const patch = parseJson(req.body);
  let patched: unknown;
  try {
    if (ct === PATCH_TYPES.json) patched = jsonPatch(current, patch);
    else if (ct === PATCH_TYPES.merge) patched = mergePatch(current, patch);
    else patched = strategicMerge(current, patch);
  } catch (err) {
    if (err instanceof JsonPatchError) {
      if (err.testFailed) {
        throw new ApiError(
          422,
          "Invalid",
          "the server rejected our request due to an error in our request",
          {},
        );
      }
      throw badRequest(err.message);
    }
    throw err;
  }
  if (!isObject(patched)) throw badRequest("the patched object is not a JSON object");
  let next = patched;
  if (t.group === "events.k8s.io") next = eventToCore(next);
  const pm = meta(next);
  if (pm.name !== req.name) {
    throw badRequest(`metadata.name: Invalid value: "${pm.name}": field is immutable`);
  }
  if (pm.uid !== meta(raw).uid) {
    throw invalid(t.kind, t.group, req.name, [{
      reason: "FieldValueInvalid",
      message: `Invalid value: "${pm.uid}": field is immutable`,
      field: "metadata.uid",
    }]);
  }
  delete next.apiVersion;
  delete next.kind;
  return {
    object: cluster.commit(t, raw, next, w, { subresource: req.subresource, track: true }),
    created: false,
  };
}

function applyPatch(
  cluster: Cluster,
  req: PatchRequest,
  raw: JsonObject | undefined,
  w: WriteOptions,
): WriteResult {
  const t = req.type;
  if (!w.manager || w.manager === "unknown") {
    throw invalid("PatchOptions", "meta.k8s.io", "", [{
      reason: "FieldValueRequired",
      message: "Required value: is required for apply patch",
      field: "fieldManager",
    }]);
  }
  let body: unknown;
  try {
    body = parseYaml(req.body);
  } catch (err) {
    throw badRequest(`error decoding YAML: ${err instanceof Error ? err.message : String(err)}`);
  }
  if (!isObject(body) || !body.apiVersion || !body.kind) {
    const b = isObject(body) ? body : {};
    throw badRequest(`invalid object type: ${b.apiVersion ?? ""}, Kind=${b.kind ?? ""}`);
  }
  if (body.apiVersion !== groupVersion(t) || body.kind !== t.kind) {
    throw badRequest(`invalid object type: ${body.apiVersion}, Kind=${body.kind}`);
  }
  const applied = clone(body);
  const am = meta(applied);
  if (am.name !== undefined && am.name !== req.name) {
    throw badRequest(
      `the name of the object (${am.name}) does not match the name on the URL (${req.name})`,
    );
  }
  am.name = req.name;
  if (t.namespaced) am.namespace = req.namespace;
  if (t.statusSubresource && req.subresource !== "status") delete applied.status;
  const opts = {
    manager: w.manager,
    force: req.force ?? false,
    apiVersion: groupVersion(t),
    now: kubeTime(),
    listKeys: cluster.listKeys(t),
    ...(req.subresource ? { subresource: req.subresource } : {}),
  };
  if (!raw) {
    if (req.subresource) throw notFound({ resource: t.plural, group: t.group, name: req.name });
    const created = serverSideApply(undefined, applied, opts);
    return { object: cluster.create(t, req.namespace, created, w, false), created: true };
  }
  const live = cluster.present(t, raw);
  const merged = serverSideApply(live, applied, opts);
  delete merged.apiVersion;
  delete merged.kind;
  delete meta(merged).resourceVersion;
  return {
    object: cluster.commit(t, raw, merged, w, { subresource: req.subresource, track: false }),
    created: false,
  };
}
