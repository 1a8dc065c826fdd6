/**
 * Driver identity. The version comes from one place: the `version` field of `deno.json`, which the
 * bundles and compiled binaries embed at build time, and which image tags are derived from.
 *
 * @module
 */
import denoJson from "../../deno.json" with { type: "json" };

/** CSI driver name; also the API group of the CRD and the prefix of our labels and annotations. */
export const DRIVER_NAME = "s3.csi.scality.com";

/** Driver version (semver), reported by GetPluginInfo and `--version`, and used for version-aware sharing. */
export const DRIVER_VERSION: string = denoJson.version;

/** Human readable version line printed by `--version`. */
export function versionLine(binary: string): string {
  return `${binary} ${DRIVER_VERSION} (${DRIVER_NAME}, deno ${Deno.version.deno})`;
}
