/**
 * API discovery documents built from the {@link ResourceRegistry}: legacy (`APIVersions`,
 * `APIGroupList`, `APIGroup`, `APIResourceList`) and aggregated v2 (`APIGroupDiscoveryList`), which
 * kubectl 1.32 asks for first ("Discovery API" in
 * https://kubernetes.io/docs/concepts/overview/kubernetes-api/).
 *
 * @module
 */
import type { JsonObject } from "./json_value.ts";
import { groupVersion, type ResourceRegistry, type ResourceType } from "./resources.ts";

/** Content-Type of aggregated discovery responses. */
export const AGGREGATED_CONTENT_TYPE =
  "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";

/** Whether an Accept header asks for aggregated discovery v2. */
export function wantsAggregated(accept: string | null): boolean {
  return !!accept && /as=APIGroupDiscoveryList/.test(accept) && /v=v2(?![a-z0-9])/.test(accept);
}

/** `/version` body. */
export function versionInfo(): JsonObject {
  return {
    major: "1",
    minor: "32",
    gitVersion: "v1.32.13-s3csi-emulator",
    gitCommit: "0000000000000000000000000000000000000000",
    gitTreeState: "clean",
    buildDate: "2026-01-01T00:00:00Z",
    goVersion: "go1.23.5",
    compiler: "gc",
    platform: "linux/amd64",
  };
}

/** Legacy `/api`. */
export function apiVersions(serverAddress: string): JsonObject {
  return {
    kind: "APIVersions",
    versions: ["v1"],
    serverAddressByClientCIDRs: [{ clientCIDR: "0.0.0.0/0", serverAddress }],
  };
}

function apiGroup(name: string, versions: string[]): JsonObject {
  const vs = versions.map((v) => ({ groupVersion: `${name}/${v}`, version: v }));
  return { name, versions: vs, preferredVersion: vs[0] };
}

/** Legacy `/apis`. */
export function apiGroupList(registry: ResourceRegistry): JsonObject {
  return {
    kind: "APIGroupList",
    apiVersion: "v1",
    groups: [...registry.groups()].map(([name, versions]) => apiGroup(name, versions)),
  };
}

/** Legacy `/apis/<group>`, or undefined for an unknown group. */
export function apiGroupDoc(registry: ResourceRegistry, group: string): JsonObject | undefined {
  const versions = registry.groups().get(group);
  return versions
    ? { kind: "APIGroup", apiVersion: "v1", ...apiGroup(group, versions) }
    : undefined;
}

/** Legacy `/api/v1` or `/apis/<g>/<v>`: main resources first, then subresources. */
export function apiResourceList(
  registry: ResourceRegistry,
  group: string,
  version: string,
): JsonObject {
  const types = registry.all().filter((t) => t.group === group && t.version === version)
    .sort((a, b) => a.plural.localeCompare(b.plural));
  const resources: JsonObject[] = [];
  for (const t of types) {
    const r: JsonObject = {
      name: t.plural,
      singularName: t.singular,
      namespaced: t.namespaced,
      kind: t.kind,
      verbs: t.verbs,
    };
    if (t.shortNames.length) r.shortNames = t.shortNames;
    if (t.categories.length) r.categories = t.categories;
    resources.push(r);
  }
  for (const t of types.filter((x) => x.statusSubresource)) {
    resources.push({
      name: `${t.plural}/status`,
      singularName: "",
      namespaced: t.namespaced,
      kind: t.kind,
      verbs: ["get", "patch", "update"],
    });
  }
  return {
    kind: "APIResourceList",
    apiVersion: "v1",
    groupVersion: groupVersion({ group, version }),
    resources,
  };
}

function discoveryResource(t: ResourceType): JsonObject {
  const kind = t.group
    ? { group: t.group, version: t.version, kind: t.kind }
    : { group: "", version: "", kind: t.kind };
  const r: JsonObject = {
    resource: t.plural,
    responseKind: kind,
    scope: t.namespaced ? "Namespaced" : "Cluster",
    singularResource: t.singular,
    verbs: t.verbs,
  };
  if (t.shortNames.length) r.shortNames = t.shortNames;
  if (t.categories.length) r.categories = t.categories;
  if (t.statusSubresource) {
    r.subresources = [{
      subresource: "status",
      responseKind: kind,
      verbs: ["get", "patch", "update"],
    }];
  }
  return r;
}

function discoveryGroup(registry: ResourceRegistry, group: string, versions: string[]): JsonObject {
  const metadata = group ? { name: group, creationTimestamp: null } : { creationTimestamp: null };
  return {
    metadata,
    versions: versions.map((v) => ({
      version: v,
      freshness: "Current",
      resources: registry.all().filter((t) => t.group === group && t.version === v).map(
        discoveryResource,
      ),
    })),
  };
}

/** Aggregated `/api` (core group only) or `/apis` (every named group). */
export function aggregatedDiscovery(registry: ResourceRegistry, core: boolean): JsonObject {
  const items = core
    ? [discoveryGroup(registry, "", ["v1"])]
    : [...registry.groups()].map(([g, vs]) => discoveryGroup(registry, g, vs));
  return {
    kind: "APIGroupDiscoveryList",
    apiVersion: "apidiscovery.k8s.io/v2",
    metadata: {},
    items,
  };
}
