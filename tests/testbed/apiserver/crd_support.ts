/**
 * CustomResourceDefinition helpers: the status a CRD gets once established (the emulator
 * establishes synchronously; a real server sets `Established` shortly after the create) and
 * list-map keys from a CRD schema for server-side apply.
 *
 * @module
 */
import { kubeTime } from "../../../src/kube/time.ts";
import { isObject, type JsonObject } from "./json_value.ts";

/** Fill `status` (conditions NamesAccepted + Established, acceptedNames, storedVersions). */
export function establishCrd(crd: JsonObject): JsonObject {
  const spec = (crd.spec ?? {}) as JsonObject;
  const now = kubeTime();
  crd.status = {
    conditions: [
      {
        type: "NamesAccepted",
        status: "True",
        lastTransitionTime: now,
        reason: "NoConflicts",
        message: "no conflicts found",
      },
      {
        type: "Established",
        status: "True",
        lastTransitionTime: now,
        reason: "InitialNamesAccepted",
        message: "the initial names have been accepted",
      },
    ],
    acceptedNames: spec.names ?? {},
    storedVersions: ((spec.versions ?? []) as JsonObject[]).filter((v) => v.storage).map((v) =>
      v.name
    ),
  };
  return crd;
}

/** `x-kubernetes-list-map-keys` of the list at `names` (`[]` for sets, undefined = atomic). */
export function crdListKeys(
  schema: JsonObject | undefined,
  names: readonly string[],
): readonly string[] | undefined {
  let cur: unknown = schema;
  for (const n of names) {
    if (!isObject(cur)) return undefined;
    if (cur.type === "array") cur = cur.items;
    if (!isObject(cur)) return undefined;
    const props = cur.properties;
    cur = isObject(props) && props[n] ? props[n] : cur.additionalProperties;
  }
  if (!isObject(cur)) return undefined;
  if (cur["x-kubernetes-list-type"] === "map") {
    return (cur["x-kubernetes-list-map-keys"] ?? []) as string[];
  }
  if (cur["x-kubernetes-list-type"] === "set") return [];
  return undefined;
}
