import assert from "node:assert/strict";
import {
  digestOf,
  imageConfig,
  imageIndex,
  imageManifest,
  MEDIA_TYPES,
  ociArchitecture,
  parseReference,
} from "./oci_layout.ts";

const LAYERS = [
  { digest: "sha256:" + "a".repeat(64), size: 10, path: "/x/a.tar", comment: "runtime" },
  { digest: "sha256:" + "b".repeat(64), size: 20, path: "/x/b.tar", comment: "app" },
];

Deno.test("references must be fully qualified (CRI reads local/x:1 as docker.io/local/x:1)", () => {
  assert.deepEqual(parseReference("localhost/s3csi/s3-csi-node:0.1.0"), {
    repository: "localhost/s3csi/s3-csi-node",
    tag: "0.1.0",
  });
  assert.deepEqual(parseReference("registry.example:5000/a/b:v1").tag, "v1");
  for (const bad of ["local/x:1", "s3-csi-node:0.1.0", "localhost/s3csi/s3-csi-node"]) {
    assert.throws(() => parseReference(bad), /fully qualified/, bad);
  }
});

Deno.test("config: runtime settings and one diff ID per layer, bottom first", () => {
  const cfg = imageConfig(
    { user: "1000:1000", entrypoint: ["/bin/s3-csi-mounter"], env: ["A=1"], labels: { l: "v" } },
    LAYERS,
    "amd64",
  );
  assert.deepEqual(cfg.config, {
    User: "1000:1000",
    Entrypoint: ["/bin/s3-csi-mounter"],
    Env: ["A=1"],
    Labels: { l: "v" },
    WorkingDir: "/",
  });
  assert.deepEqual(cfg.rootfs, { type: "layers", diff_ids: LAYERS.map((l) => l.digest) });
  assert.equal(cfg.os, "linux");
});

Deno.test("manifest and index: uncompressed layers, both name annotations", () => {
  const config = { mediaType: MEDIA_TYPES.config, ...digestOf(new TextEncoder().encode("{}")) };
  const manifest = imageManifest(config, LAYERS) as { layers: { mediaType: string }[] };
  assert.ok(manifest.layers.every((l) => l.mediaType === MEDIA_TYPES.layer));
  const index = imageIndex("localhost/s3csi/s3-csi-node:0.1.0", {
    mediaType: MEDIA_TYPES.manifest,
    digest: "sha256:" + "c".repeat(64),
    size: 3,
  }, "amd64") as { manifests: { annotations: Record<string, string> }[] };
  assert.deepEqual(index.manifests[0]!.annotations, {
    "io.containerd.image.name": "localhost/s3csi/s3-csi-node:0.1.0",
    "org.opencontainers.image.ref.name": "0.1.0",
  });
});

Deno.test("digests are sha256 of the bytes", () => {
  assert.deepEqual(digestOf(new TextEncoder().encode("abc")), {
    digest: "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
    size: 3,
  });
});

Deno.test("architectures map to OCI names", () => {
  assert.equal(ociArchitecture("x86_64"), "amd64");
  assert.equal(ociArchitecture("aarch64"), "arm64");
  assert.throws(() => ociArchitecture("riscv64"), /Unsupported architecture/);
});
