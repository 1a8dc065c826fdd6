/**
 * What Mountpoint Pods run in the kubelet emulator: this repository's mounter, started by the
 * pod's (unprivileged) user. From source when every directory down to it is readable by others;
 * otherwise (e.g. a clone under a private home) from a self-contained bundle (`deno bundle`, npm
 * packages included) written into the kubelet root, which the emulator keeps traversable.
 *
 * The Mountpoint image carries our `mount-s3` and the supervisor the mounter execs into
 * (`s3-csi-supervisor`): {@link withEngine} puts the dir `scripts/build_engine.sh` built them in
 * ({@link findEngineBin}) first on the containers' PATH.
 *
 * @module
 */
import { dirname } from "node:path";
import { fileURLToPath } from "node:url";
import { CONTAINER_PATH, type ImageMapping } from "./container_spec.ts";

const REPO_ROOT = fileURLToPath(new URL("../../../", import.meta.url));

/** The mounter's entrypoint in this repository. */
export const MOUNTER_SOURCE = `${REPO_ROOT}src/cmd/mounter/main.ts`;

/** True when a user other than the owner can reach and read `path` (o+x on dirs, o+r on it). */
export async function readableByOthers(path: string): Promise<boolean> {
  const file = await Deno.stat(path).catch(() => undefined);
  if (!file || ((file.mode ?? 0) & 0o004) === 0) return false;
  for (let dir = dirname(path);; dir = dirname(dir)) {
    const info = await Deno.stat(dir).catch(() => undefined);
    if (!info || ((info.mode ?? 0) & 0o001) === 0) return false;
    if (dir === "/") return true;
  }
}

/**
 * Our `mount-s3`, with `s3-csi-supervisor` beside it: `$S3CSI_ENGINE_BIN`, else the binary
 * `scripts/build_engine.sh` cached for these sources (never builds). Returns the path, or the
 * reason there is none.
 */
export function findEngineBin(): { bin: string } | { reason: string } {
  const found = engineOnly();
  if ("reason" in found) return found;
  const supervisor = found.bin.replace(/[^/]+$/, "s3-csi-supervisor");
  try {
    if (Deno.statSync(supervisor).isFile) return found;
  } catch { /* below */ }
  return {
    reason: `no s3-csi-supervisor beside ${found.bin}: rebuild with scripts/build_engine.sh`,
  };
}

function engineOnly(): { bin: string } | { reason: string } {
  const fromEnv = Deno.env.get("S3CSI_ENGINE_BIN");
  if (fromEnv) {
    try {
      if (Deno.statSync(fromEnv).isFile) return { bin: fromEnv };
    } catch { /* below */ }
    return { reason: `S3CSI_ENGINE_BIN=${fromEnv} is not a file` };
  }
  const r = new Deno.Command("bash", {
    args: [`${REPO_ROOT}scripts/build_engine.sh`, "--no-build"],
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).outputSync();
  const last = (b: Uint8Array) => new TextDecoder().decode(b).trim().split("\n").at(-1) ?? "";
  const m = /^ENGINE_BIN=(.+)$/.exec(last(r.stdout));
  return r.success && m
    ? { bin: m[1]! }
    : { reason: `no mount-s3 built: run scripts/build_engine.sh (${last(r.stderr)})` };
}

/** `mapping` with the directory of `engineBin` (named `mount-s3`) first on PATH. */
export function withEngine(mapping: ImageMapping, engineBin: string): ImageMapping {
  const path = `${dirname(engineBin)}:${CONTAINER_PATH}`;
  return { ...mapping, env: (uid) => ({ ...(mapping.env?.(uid) ?? {}), PATH: path }) };
}

/**
 * `deno run -A --cached-only --node-modules-dir=manual <entry>` with a `DENO_DIR` per uid under
 * the kubelet root. `manual`: the pod's (unprivileged) user only reads the checkout's
 * `node_modules`, which root set up. With the checkout's default (`auto`) Deno re-links
 * `node_modules` whenever its setup cache does not cover what it resolves (no `.bin/` yet, a
 * missing or stale `.setup-cache.bin`, a root `deno` re-linking at that moment); as that user the
 * write fails with EACCES and the mounter exits 1 before any of its code runs.
 */
export function mounterMapping(entry: string, kubeletRoot: string): ImageMapping {
  return {
    argv: [
      Deno.execPath(),
      "run",
      "-A",
      "--quiet",
      "--cached-only",
      "--node-modules-dir=manual",
      entry,
    ],
    env: (uid) => ({ DENO_DIR: `${kubeletRoot}/deno-dir/${uid}`, DENO_NO_UPDATE_CHECK: "1" }),
  };
}

/**
 * The mapping for Mountpoint Pods on a node whose kubelet root is `kubeletRoot`: the source
 * entrypoint when others can read it (unless `bundle` is set), else a bundle at
 * `<kubeletRoot>/s3-csi-mounter.js`.
 * @throws when the bundle cannot be built
 */
export async function prepareMounterImage(
  kubeletRoot: string,
  options: { readonly bundle?: boolean } = {},
): Promise<ImageMapping> {
  if (!options.bundle && await readableByOthers(MOUNTER_SOURCE)) {
    return mounterMapping(MOUNTER_SOURCE, kubeletRoot);
  }
  const output = `${kubeletRoot}/s3-csi-mounter.js`;
  const r = await new Deno.Command(Deno.execPath(), {
    args: [
      "bundle",
      "--quiet",
      "--platform",
      "deno",
      "--packages",
      "bundle",
      "--output",
      output,
      MOUNTER_SOURCE,
    ],
    cwd: REPO_ROOT,
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).output();
  if (!r.success) {
    throw new Error(
      `deno bundle of the mounter failed: ${new TextDecoder().decode(r.stderr).trim()}`,
    );
  }
  await Deno.chmod(output, 0o644);
  return mounterMapping(output, kubeletRoot);
}
