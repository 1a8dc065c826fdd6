/**
 * OCI archives of the real-node tier's own images, from static binaries built by `build.sh`:
 * the pod sandbox (`pause`, upstream `pause.c`), the sidecar stand-ins (our Go code in
 * `sidecars/`) and a busybox for test workloads. Same archive format as the driver's local images
 * (`scripts/oci_layout.ts`).
 *
 * Usage: deno run -A build_images.ts --bin-dir DIR --out DIR --prefix localhost/s3csi-testbed
 * stdout: `IMAGE=<reference> <archive>` per image.
 *
 * @module
 */
import { parseArgs } from "node:util";
import { copyInto } from "../../../../scripts/image_rootfs.ts";
import { tarLayer, writeImageArchive } from "../../../../scripts/oci_layout.ts";

/** An image of the tier: one static binary as the entrypoint. */
export interface TestbedImage {
  /** Binary name in --bin-dir, installed as `/<name>`; or an absolute host path. */
  binary: string;
  /** Install at this path instead of `/<name>`. */
  path?: string;
  /** A busybox: add a symlink per applet in `/bin` (shell, mount, nc, ...). */
  applets?: boolean;
  /** Repository name under the prefix. */
  repository: string;
  /** Tag. */
  tag: string;
  /** `uid:gid`. */
  user: string;
  /** What it is (label). */
  description: string;
}

/** The images, with the upstream images' entrypoint paths. */
export const TESTBED_IMAGES: readonly TestbedImage[] = [
  {
    binary: "pause",
    repository: "pause",
    tag: "3.10",
    user: "65535:65535",
    description: "pod sandbox: upstream build/pause/linux/pause.c, gcc -static",
  },
  {
    binary: "csi-node-driver-registrar",
    repository: "csi-node-driver-registrar",
    tag: "standin",
    user: "0:0",
    description: "stand-in for node-driver-registrar (s3csi test tier)",
  },
  {
    binary: "livenessprobe",
    repository: "livenessprobe",
    tag: "standin",
    user: "0:0",
    description: "stand-in for livenessprobe (s3csi test tier)",
  },
  {
    binary: "csi-provisioner",
    repository: "csi-provisioner",
    tag: "standin",
    user: "0:0",
    description: "stand-in for external-provisioner v5.3, sig-storage-lib-external-provisioner v11",
  },
  {
    binary: "/bin/busybox",
    path: "/bin/busybox",
    applets: true,
    repository: "busybox",
    tag: "host",
    user: "0:0",
    description: "test workloads: Debian busybox-static with its applets",
  },
];

async function applets(busybox: string): Promise<string[]> {
  const r = await new Deno.Command(busybox, { args: ["--list"], stdout: "piped" }).output();
  if (r.code !== 0) throw new Error(`${busybox} --list failed`);
  return new TextDecoder().decode(r.stdout).split("\n").filter((a) => /^[a-z0-9_.[-]+$/.test(a));
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    args: Deno.args,
    options: {
      "bin-dir": { type: "string" },
      out: { type: "string" },
      prefix: { type: "string" },
    },
  });
  const bin = values["bin-dir"];
  const out = values.out;
  const prefix = values.prefix;
  if (!bin || !out || !prefix) {
    throw new Error("usage: build_images.ts --bin-dir D --out D --prefix P");
  }
  await Deno.mkdir(out, { recursive: true });
  const work = await Deno.makeTempDir({ dir: out, prefix: ".work-" });
  try {
    for (const img of TESTBED_IMAGES) {
      const ref = `${prefix}/${img.repository}:${img.tag}`;
      const root = `${work}/${img.repository}`;
      const source = img.binary.startsWith("/") ? img.binary : `${bin}/${img.binary}`;
      const path = img.path ?? `/${img.binary}`;
      await copyInto(root, source, path);
      if (img.applets) {
        for (const a of await applets(source)) {
          if (`/bin/${a}` !== path) {
            await Deno.symlink("busybox", `${root}/bin/${a}`).catch(() => {});
          }
        }
      }
      const layer = await tarLayer(root, `${work}/${img.repository}.tar`, img.description);
      const archive = `${out}/${img.repository}.oci.tar`;
      await writeImageArchive(
        ref,
        {
          user: img.user,
          entrypoint: [path],
          env: ["PATH=/usr/local/bin:/usr/bin:/bin"],
          labels: { "org.opencontainers.image.description": img.description },
        },
        [layer],
        archive,
      );
      Deno.stdout.writeSync(new TextEncoder().encode(`IMAGE=${ref} ${archive}\n`));
    }
  } finally {
    await Deno.remove(work, { recursive: true });
  }
}

if (import.meta.main) {
  try {
    await main();
  } catch (e) {
    Deno.stderr.writeSync(
      new TextEncoder().encode(`build_images: ${e instanceof Error ? e.message : String(e)}\n`),
    );
    Deno.exit(1);
  }
}
