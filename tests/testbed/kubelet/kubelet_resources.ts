/**
 * API resources the kubelet emulator reads or writes that `src/kube/resources.ts` does not list
 * (CSIDriver, CSINode, ConfigMap), and a pod reference helper.
 *
 * @module
 */
import type { Resource } from "../../../src/kube/resources.ts";
import type { KubeObject } from "../../../src/kube/client.ts";

/** CSIDrivers. */
export const CSI_DRIVERS: Resource = {
  group: "storage.k8s.io",
  version: "v1",
  plural: "csidrivers",
  kind: "CSIDriver",
  namespaced: false,
};

/** CSINodes. */
export const CSI_NODES: Resource = {
  group: "storage.k8s.io",
  version: "v1",
  plural: "csinodes",
  kind: "CSINode",
  namespaced: false,
};

/** ConfigMaps (env `configMapKeyRef`). */
export const CONFIGMAPS_RESOURCE: Resource = {
  group: "",
  version: "v1",
  plural: "configmaps",
  kind: "ConfigMap",
  namespaced: true,
};

/** `namespace/name` of an object. */
export function podRef(obj: KubeObject): string {
  return `${obj.metadata?.namespace ?? ""}/${obj.metadata?.name ?? ""}`;
}
