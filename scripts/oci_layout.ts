/**
 * OCI image archives without a registry or a container engine: each layer is a directory tarred
 * reproducibly (GNU tar: sorted names, mtime 0, uid/gid 0), and the archive is an OCI image layout
 * (`oci-layout`, `index.json`, `blobs/sha256/…`) in one tar file that `ctr images import` and other
 * OCI tools read. Layers are stored uncompressed (`application/vnd.oci.image.layer.v1.tar`): the
 * archives are imported on the same machine, where gzip would only cost time.
 *
 * The index entry carries both `org.opencontainers.image.ref.name` (the tag, as the OCI spec says)
 * and `io.containerd.image.name` (the fully qualified reference containerd imports it under; CRI
 * turns an unqualified `local/x:1` into `docker.io/local/x:1`, so local images must be qualified).
 *
 * @module
 */
import { createHash } from "node:crypto";
import { createReadStream } from "node:fs";

/** The parts of an image config the runtime uses. */
export interface ImageRuntimeConfig {
  /** `uid:gid` the entrypoint runs as. */
  user: string;
  /** Entrypoint argv. */
  entrypoint: string[];
  /** Default arguments. */
  cmd?: string[];
  /** `KEY=value` entries. */
  env: string[];
  /** Image labels. */
  labels: Record<string, string>;
  /** Working directory. @default "/" */
  workingDir?: string;
}

/** A layer that is already on disk as a tar file. */
export interface LayerBlob {
  /** `sha256:<hex>` of the tar (also its diff ID: the layer is uncompressed). */
  digest: string;
  /** Size in bytes. */
  size: number;
  /** Path of the tar file. */
  path: string;
  /** What the layer holds (image history). */
  comment: string;
}

/** An OCI content descriptor. */
export interface Descriptor {
  /** Media type. */
  mediaType: string;
  /** `sha256:<hex>`. */
  digest: string;
  /** Bytes. */
  size: number;
  /** Annotations. */
  annotations?: Record<string, string>;
  /** Platform (index entries). */
  platform?: { architecture: string; os: string };
}

/** OCI media types used here. */
export const MEDIA_TYPES = {
  manifest: "application/vnd.oci.image.manifest.v1+json",
  config: "application/vnd.oci.image.config.v1+json",
  layer: "application/vnd.oci.image.layer.v1.tar",
  index: "application/vnd.oci.image.index.v1+json",
} as const;

/** Go's name for the machine architecture of this Deno process (OCI `architecture`). */
export function ociArchitecture(arch: string = Deno.build.arch): string {
  switch (arch) {
    case "x86_64":
      return "amd64";
    case "aarch64":
      return "arm64";
    default:
      throw new Error(`Unsupported architecture ${arch}: images are built for amd64 or arm64`);
  }
}

/** Splits `registry/path/name:tag` into repository and tag; a reference needs an explicit domain. */
export function parseReference(ref: string): { repository: string; tag: string } {
  const m = /^([a-z0-9.-]+(?::[0-9]+)?\/[a-z0-9._\/-]+):([A-Za-z0-9_][A-Za-z0-9_.-]{0,127})$/.exec(
    ref,
  );
  const domain = ref.split("/")[0] ?? "";
  if (!m || !(domain.includes(".") || domain.includes(":") || domain === "localhost")) {
    throw new Error(
      `Image reference "${ref}" must be fully qualified as <domain>/<path>:<tag> (for example ` +
        `localhost/s3csi/s3-csi-node:0.1.0): the CRI would read an unqualified name as docker.io/…`,
    );
  }
  return { repository: m[1]!, tag: m[2]! };
}

/** The image config JSON (OCI image spec `config.json`). */
export function imageConfig(
  config: ImageRuntimeConfig,
  layers: readonly LayerBlob[],
  architecture: string,
): Record<string, unknown> {
  return {
    architecture,
    os: "linux",
    config: {
      User: config.user,
      Entrypoint: config.entrypoint,
      ...(config.cmd ? { Cmd: config.cmd } : {}),
      Env: config.env,
      Labels: config.labels,
      WorkingDir: config.workingDir ?? "/",
    },
    rootfs: { type: "layers", diff_ids: layers.map((l) => l.digest) },
    history: layers.map((l) => ({ created_by: l.comment })),
  };
}

/** The image manifest JSON. */
export function imageManifest(
  config: Descriptor,
  layers: readonly LayerBlob[],
): Record<string, unknown> {
  return {
    schemaVersion: 2,
    mediaType: MEDIA_TYPES.manifest,
    config,
    layers: layers.map((l) => ({ mediaType: MEDIA_TYPES.layer, digest: l.digest, size: l.size })),
  };
}

/** The layout's `index.json`, naming the manifest with the image reference. */
export function imageIndex(
  ref: string,
  manifest: Descriptor,
  architecture: string,
): Record<string, unknown> {
  const { tag } = parseReference(ref);
  return {
    schemaVersion: 2,
    mediaType: MEDIA_TYPES.index,
    manifests: [{
      ...manifest,
      annotations: {
        "io.containerd.image.name": ref,
        "org.opencontainers.image.ref.name": tag,
      },
      platform: { architecture, os: "linux" },
    }],
  };
}

/** `sha256:<hex>` and size of bytes. */
export function digestOf(bytes: Uint8Array): { digest: string; size: number } {
  return {
    digest: `sha256:${createHash("sha256").update(bytes).digest("hex")}`,
    size: bytes.byteLength,
  };
}

/** `sha256:<hex>` and size of a file, streamed. */
export async function digestOfFile(path: string): Promise<{ digest: string; size: number }> {
  const hash = createHash("sha256");
  let size = 0;
  for await (const chunk of createReadStream(path)) {
    hash.update(chunk as Uint8Array);
    size += (chunk as Uint8Array).byteLength;
  }
  return { digest: `sha256:${hash.digest("hex")}`, size };
}

async function run(cmd: string, args: string[]): Promise<void> {
  const { code, stderr } = await new Deno.Command(cmd, { args, stdout: "null", stderr: "piped" })
    .output();
  if (code !== 0) {
    throw new Error(
      `${cmd} ${args.join(" ")} failed (exit ${code}): ${new TextDecoder().decode(stderr)}`,
    );
  }
}

/** Options of GNU tar that make a tar depend only on the files' names, contents and modes. */
const REPRODUCIBLE_TAR = [
  "--sort=name",
  "--mtime=@0",
  "--owner=0",
  "--group=0",
  "--numeric-owner",
  "--format=posix",
  "--pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime",
];

/**
 * Tars the directory `root` (its entries, not the directory itself) into `out` reproducibly and
 * returns the layer blob.
 */
export async function tarLayer(root: string, out: string, comment: string): Promise<LayerBlob> {
  const entries: string[] = [];
  for await (const e of Deno.readDir(root)) entries.push(e.name);
  entries.sort();
  if (entries.length === 0) throw new Error(`Layer ${comment}: ${root} is empty`);
  await run("tar", [...REPRODUCIBLE_TAR, "-C", root, "-cf", out, "--", ...entries]);
  return { ...(await digestOfFile(out)), path: out, comment };
}

/**
 * Writes the OCI image layout archive `out` for the image `ref` from its layers (bottom first) and
 * returns the manifest digest (the image ID containerd shows).
 */
export async function writeImageArchive(
  ref: string,
  config: ImageRuntimeConfig,
  layers: readonly LayerBlob[],
  out: string,
  architecture: string = ociArchitecture(),
): Promise<string> {
  parseReference(ref);
  const dir = await Deno.makeTempDir({ dir: out.replace(/\/[^/]*$/, "") || ".", prefix: ".oci-" });
  try {
    const blobs = `${dir}/blobs/sha256`;
    await Deno.mkdir(blobs, { recursive: true });
    const enc = new TextEncoder();
    const putJson = async (value: unknown): Promise<{ digest: string; size: number }> => {
      const bytes = enc.encode(JSON.stringify(value));
      const d = digestOf(bytes);
      await Deno.writeFile(`${blobs}/${d.digest.slice(7)}`, bytes);
      return d;
    };
    for (const l of layers) {
      const target = `${blobs}/${l.digest.slice(7)}`;
      // Hard links keep big layers from being copied (same file system); fall back to a copy.
      await Deno.link(l.path, target).catch(() => Deno.copyFile(l.path, target));
    }
    const cfg = await putJson(imageConfig(config, layers, architecture));
    const manifest = await putJson(
      imageManifest({ mediaType: MEDIA_TYPES.config, ...cfg }, layers),
    );
    await Deno.writeTextFile(
      `${dir}/index.json`,
      JSON.stringify(
        imageIndex(ref, { mediaType: MEDIA_TYPES.manifest, ...manifest }, architecture),
      ),
    );
    await Deno.writeTextFile(`${dir}/oci-layout`, JSON.stringify({ imageLayoutVersion: "1.0.0" }));
    const tmp = `${out}.tmp`;
    await run("tar", [
      ...REPRODUCIBLE_TAR,
      "-C",
      dir,
      "-cf",
      tmp,
      "--",
      "blobs",
      "index.json",
      "oci-layout",
    ]);
    await Deno.rename(tmp, out);
    return manifest.digest;
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}
