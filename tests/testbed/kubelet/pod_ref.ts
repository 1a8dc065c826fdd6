/**
 * A pod reference helper of the kubelet emulator.
 *
 * @module
 */
import type { KubeObject } from "../../../src/kube/client.ts";

/** `namespace/name` of an object. */
export function podRef(obj: KubeObject): string {
  return `${obj.metadata?.namespace ?? ""}/${obj.metadata?.name ?? ""}`;
}
