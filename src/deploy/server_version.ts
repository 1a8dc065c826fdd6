/**
 * The oldest Kubernetes the driver runs on, and the check `deno task deploy` makes before it applies
 * anything: the attachment CRD declares `selectableFields` (field selectors on custom resources,
 * on by default since Kubernetes 1.31, GA in 1.32), which the node plugin's informer relies on; an
 * older API server would accept the CRD without them and the node plugin's list would fail.
 *
 * @module
 */
import { ConfigError } from "../util/errors.ts";

/** Oldest supported Kubernetes minor version (1.x). */
export const MIN_KUBERNETES_MINOR = 31;

/** The API server is older than {@link MIN_KUBERNETES_MINOR}. */
export class UnsupportedServerError extends ConfigError {
  override name = "UnsupportedServerError";
}

/** `major`/`minor` of a `/version` answer (minor may read "31+"; gitVersion as a fallback). */
export function parseServerVersion(
  v: { major?: string; minor?: string; gitVersion?: string },
): { major: number; minor: number } | undefined {
  let major = parseInt(v.major ?? "", 10);
  let minor = parseInt(v.minor ?? "", 10);
  if (!Number.isFinite(major) || !Number.isFinite(minor)) {
    const m = /^v?(\d+)\.(\d+)/.exec(v.gitVersion ?? "");
    if (!m) return undefined;
    major = Number(m[1]);
    minor = Number(m[2]);
  }
  return { major, minor };
}

/** @throws {UnsupportedServerError} when the version is older than 1.31 or unreadable */
export function checkServerVersion(
  v: { major?: string; minor?: string; gitVersion?: string },
  server: string,
): string {
  const parsed = parseServerVersion(v);
  const shown = v.gitVersion || `${v.major}.${v.minor}`;
  if (!parsed) {
    throw new UnsupportedServerError(
      `${server} answered /version with no version we can read (${
        JSON.stringify(v)
      }); nothing was applied`,
    );
  }
  if (parsed.major < 1 || (parsed.major === 1 && parsed.minor < MIN_KUBERNETES_MINOR)) {
    throw new UnsupportedServerError(
      `${server} runs Kubernetes ${shown}; the S3 CSI driver needs 1.${MIN_KUBERNETES_MINOR} or newer ` +
        `(its MountpointS3PodAttachment CRD uses selectableFields, on by default since 1.${MIN_KUBERNETES_MINOR}). ` +
        "Upgrade the cluster; nothing was applied",
    );
  }
  return shown;
}
