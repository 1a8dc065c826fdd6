/**
 * CSI inline (ephemeral) volumes: a pod's own `csi:` volume of this driver, instead of a claim.
 * What kubelet does with one, and the two rules both the controller and the node plugin apply:
 *
 * - kubelet names it by a handle unique to the pod and volume, `csi-<sha256(podUID + name)>`
 *   ({@link inlineVolumeHandle}), and publishes it at `…/volumes/kubernetes.io~csi/<name>/mount`
 *   with `csi.storage.k8s.io/ephemeral: "true"` in the volume context; its mount options travel
 *   in the `mountOptions` attribute ({@link splitMountOptions}).
 * - it reads S3 with the pod's own Secret (`nodePublishSecretRef`, in the pod's namespace):
 *   `authenticationSource` defaults to `secret`, and `driver` is refused
 *   ({@link inlineAuthenticationProblem}): any pod author writes an inline volume, so lending it
 *   the driver's credentials would open every bucket they reach to every namespace.
 *
 * Writers: kubelet, users. Readers: `src/controller/` (the workload's volumes), `src/node/`.
 *
 * @module
 */
import { createHash } from "node:crypto";

/**
 * The volume handle kubelet gives an inline volume (`makeVolumeHandle` in kubelet's
 * `pkg/volume/csi/csi_mounter.go`).
 */
export function inlineVolumeHandle(podUID: string, volumeName: string): string {
  return `csi-${createHash("sha256").update(`${podUID}${volumeName}`).digest("hex")}`;
}

/** The `mountOptions` attribute of an inline volume as a list (comma-separated, trimmed). */
export function splitMountOptions(attribute: string | undefined): string[] {
  return (attribute ?? "").split(",").map((o) => o.trim()).filter((o) => o !== "");
}

/** The authentication source of an inline volume: `secret` unless it names another. */
export function inlineAuthenticationSource(attribute: string | undefined): string {
  return attribute || "secret";
}

/** Why an inline volume's authentication is refused, or undefined when it is fine. */
export function inlineAuthenticationProblem(
  source: string,
  hasSecret: boolean,
): string | undefined {
  if (source === "driver") {
    return `Inline volumes cannot use authenticationSource "driver": the driver's credentials are not lent to volumes any pod can declare. Use authenticationSource: secret (the default) with nodePublishSecretRef naming a Secret in the pod's namespace`;
  }
  if (source === "secret" && !hasSecret) {
    return `Inline volume has no nodePublishSecretRef: name a Secret in the pod's namespace with keys access_key_id and secret_access_key`;
  }
  return undefined;
}
