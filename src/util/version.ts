/**
 * Driver identity. The version comes from one place: the `version` field of `deno.json`, which the
 * bundles and compiled binaries embed at build time, and which image tags are derived from. A build
 * of another version from the same tree (`S3CSI_VERSION`, {@link VERSION_ENV}) makes
 * `scripts/build.ts` embed that version instead (the bundler reads a copy of `deno.json` with it),
 * and `deno task images:local`/`render`/`deploy` tag and label with it.
 *
 * @module
 */
import denoJson from "../../deno.json" with { type: "json" };

/** CSI driver name; also the API group of the CRD and the prefix of our labels and annotations. */
export const DRIVER_NAME = "s3.csi.scality.com";

/** Driver version (semver), reported by GetPluginInfo and `--version`, and used for version-aware sharing. */
export const DRIVER_VERSION: string = denoJson.version;

/**
 * Environment variable of the build and deploy commands (never of the binaries: they embed their
 * version): the version to build, tag and deploy instead of `deno.json`'s, e.g. to try an upgrade
 * with two builds of one tree.
 */
export const VERSION_ENV = "S3CSI_VERSION";

/**
 * Why `version` cannot be a driver version, or undefined: it becomes an image tag and a label value
 * (the sharing key's `mounted-by-csi-driver-version`), so it must be semver without build metadata
 * (`+` is allowed in neither) and at most 63 characters.
 */
export function versionProblem(version: string): string | undefined {
  if (version.length > 63) return `"${version.slice(0, 70)}…" is longer than 63 characters`;
  return /^\d+\.\d+\.\d+(-[0-9A-Za-z]+(\.[0-9A-Za-z-]+|-[0-9A-Za-z]+)*)?$/.test(version)
    ? undefined
    : `"${version}" is not a version: MAJOR.MINOR.PATCH with an optional -PRERELEASE (letters, digits, dots and dashes; no +BUILD: image tags and label values cannot hold "+")`;
}

/** Human readable version line printed by `--version`. */
export function versionLine(binary: string): string {
  return `${binary} ${DRIVER_VERSION} (${DRIVER_NAME}, deno ${Deno.version.deno})`;
}
