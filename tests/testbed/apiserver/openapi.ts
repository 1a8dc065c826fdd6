/**
 * Minimal OpenAPI v3 (https://kubernetes.io/docs/concepts/overview/kubernetes-api/): an index of
 * group-versions plus, per group-version, one PATCH operation per kind that declares the
 * `fieldValidation` query parameter. That is what `kubectl apply`/`create -f` need to skip
 * client-side validation and send `fieldValidation=Strict`. There are no schemas, so
 * `kubectl explain` does not work.
 *
 * @module
 */
import type { JsonObject } from "./json_value.ts";
import { groupVersion, type ResourceRegistry } from "./resources.ts";

function gvPath(group: string, version: string): string {
  return group ? `apis/${group}/${version}` : `api/${version}`;
}

/** `/openapi/v3` index. */
export function openApiIndex(registry: ResourceRegistry): JsonObject {
  const paths: JsonObject = {};
  for (const t of registry.all()) {
    const p = gvPath(t.group, t.version);
    paths[p] = { serverRelativeURL: `/openapi/v3/${p}` };
  }
  return { paths };
}

/** `/openapi/v3/<api/v1 | apis/g/v>` document, or undefined for an unknown group-version. */
export function openApiGroupVersion(
  registry: ResourceRegistry,
  gvp: string,
): JsonObject | undefined {
  const types = registry.all().filter((t) => gvPath(t.group, t.version) === gvp);
  if (!types.length) return undefined;
  const paths: JsonObject = {};
  const prefix = `/${gvp}`;
  for (const t of types) {
    const item = t.namespaced
      ? `${prefix}/namespaces/{namespace}/${t.plural}/{name}`
      : `${prefix}/${t.plural}/{name}`;
    const gvk = { group: t.group, version: t.version, kind: t.kind };
    paths[item] = {
      patch: {
        "x-kubernetes-group-version-kind": gvk,
        "x-kubernetes-action": "patch",
        operationId: `patch${t.kind}`,
        parameters: [
          { name: "fieldValidation", in: "query", schema: { type: "string", uniqueItems: true } },
          { name: "fieldManager", in: "query", schema: { type: "string", uniqueItems: true } },
        ],
        responses: { "200": { description: "OK" } },
      },
    };
  }
  return {
    openapi: "3.0.0",
    info: { title: "Kubernetes API emulator", version: groupVersion(types[0]!) },
    paths,
  };
}
