import assert from "node:assert/strict";
import type { NodePublishVolumeRequest } from "../csi/gen/csi_types.ts";
import { CsiError } from "../csi/errors.ts";
import { mountArgProblem } from "../mppod/mount_message.ts";
import { MOUNT_OPTION_SPECS } from "../mppod/mount_option_spec.ts";
import { renderArgs } from "./mount_options.ts";
import { checkTargetPath, validatePublish } from "./publish_request.ts";

const ROOT = "/var/lib/kubelet";
const TARGET = `${ROOT}/pods/uid-1/volumes/kubernetes.io~csi/pv-1/mount`;

function req(more: Partial<NodePublishVolumeRequest> = {}): NodePublishVolumeRequest {
  return {
    volumeId: "vol-1",
    targetPath: TARGET,
    volumeCapability: {
      mount: { mountFlags: ["allow-delete"] },
      accessMode: { mode: "MULTI_NODE_MULTI_WRITER" },
    },
    volumeContext: { bucketName: "bucket-1", "csi.storage.k8s.io/pod.uid": "uid-1" },
    ...more,
  };
}

Deno.test("validatePublish() fills the driver's options", () => {
  const p = validatePublish(req(), ROOT);
  assert.equal(p.podUID, "uid-1");
  assert.equal(p.volumeName, "pv-1");
  assert.equal(p.bucket, "bucket-1");
  assert.equal(p.authenticationSource, "driver");
  assert.equal(p.readOnlyVolume, false);
  assert.deepEqual([...p.options.keys()].sort(), [
    "allow-delete",
    "allow-other",
    "force-path-style",
  ]);
});

Deno.test("validatePublish() maps fsGroup to gid and group modes", () => {
  const p = validatePublish(
    req({
      volumeCapability: {
        mount: { volumeMountGroup: "3000", mountFlags: ["file-mode=0640"] },
        accessMode: { mode: "SINGLE_NODE_WRITER" },
      },
    }),
    ROOT,
  );
  assert.equal(p.fsGroup, 3000);
  assert.equal(p.options.get("gid"), "3000");
  assert.equal(p.options.get("dir-mode"), "0770");
  assert.equal(p.options.get("file-mode"), "0640");
});

Deno.test("validatePublish() read-only: access mode or option makes the source read-only", () => {
  const ro = validatePublish(
    req({ volumeCapability: { mount: {}, accessMode: { mode: "MULTI_NODE_READER_ONLY" } } }),
    ROOT,
  );
  assert.equal(ro.readOnlyVolume, true);
  assert.equal(ro.options.get("read-only"), true);
  const bind = validatePublish(req({ readonly: true }), ROOT);
  assert.equal(bind.readOnlyVolume, false);
  assert.equal(bind.readOnlyTarget, true);
});

Deno.test("validatePublish() merges prefix and region from the volume context", () => {
  const p = validatePublish(
    req({ volumeContext: { bucketName: "b-1", prefix: "team/", region: "eu-west-1" } }),
    ROOT,
  );
  assert.equal(p.options.get("prefix"), "team/");
  assert.equal(p.options.get("region"), "eu-west-1");
  assert.throws(
    () =>
      validatePublish(
        req({
          volumeContext: { bucketName: "b-1", prefix: "a/" },
          volumeCapability: {
            mount: { mountFlags: ["prefix=b/"] },
            accessMode: { mode: "MULTI_NODE_MULTI_WRITER" },
          },
        }),
        ROOT,
      ),
    /conflicts with mount option "prefix=b\/"/,
  );
});

Deno.test("validatePublish() takes the volume's endpoint and region from its Secret", () => {
  const p = validatePublish(
    req({ secrets: { endpoint: "https://S3.Site-B.example:8443/", region: "site-b" } }),
    ROOT,
  );
  assert.equal(p.endpoint, "https://s3.site-b.example:8443");
  assert.equal(p.options.get("region"), "site-b");
  assert.equal(validatePublish(req(), ROOT).endpoint, undefined);
  // The same region in both places is fine; two different ones are a conflict.
  const ctx = { bucketName: "b-1", region: "site-b" };
  assert.equal(
    validatePublish(req({ volumeContext: ctx, secrets: { region: "site-b" } }), ROOT).options
      .get("region"),
    "site-b",
  );
  assert.throws(
    () => validatePublish(req({ volumeContext: ctx, secrets: { region: "site-c" } }), ROOT),
    /Secret key "region" \("site-c"\) conflicts with the volume's region "site-b"/,
  );
});

Deno.test("validatePublish(): an inline volume brings its options and needs the pod's Secret", () => {
  const inline = (ctx: Record<string, string>, more: Partial<NodePublishVolumeRequest> = {}) =>
    req({
      volumeId: "csi-0123abcd",
      targetPath: `${ROOT}/pods/uid-1/volumes/kubernetes.io~csi/data/mount`,
      volumeCapability: { mount: {}, accessMode: { mode: "SINGLE_NODE_WRITER" } },
      volumeContext: {
        bucketName: "b-1",
        "csi.storage.k8s.io/ephemeral": "true",
        "csi.storage.k8s.io/pod.uid": "uid-1",
        ...ctx,
      },
      ...more,
    });
  const p = validatePublish(
    inline({ mountOptions: "allow-delete, region=eu-1,prefix=team/" }),
    ROOT,
  );
  assert.equal(p.ephemeral, true);
  assert.equal(p.authenticationSource, "secret", "the pod's own Secret by default");
  assert.equal(p.volumeName, "data");
  assert.deepEqual(
    [p.options.has("allow-delete"), p.options.get("region"), p.options.get("prefix")],
    [true, "eu-1", "team/"],
  );
  assert.equal(p.readOnlyVolume, false);
  const ro = validatePublish(inline({}, { readonly: true }), ROOT);
  assert.deepEqual([ro.readOnlyVolume, ro.readOnlyTarget], [true, true]);
  assert.throws(
    () => validatePublish(inline({ authenticationSource: "driver" }), ROOT),
    /Inline volumes cannot use authenticationSource "driver"/,
  );
  assert.throws(
    () => validatePublish(inline({ mountOptions: "allow-delete,rm -rf" }), ROOT),
    (e: unknown) => e instanceof CsiError && e.code === 3,
  );
  // A PersistentVolume keeps its options in spec.mountOptions.
  assert.throws(
    () => validatePublish(req({ volumeContext: { bucketName: "b-1", mountOptions: "x" } }), ROOT),
    /"mountOptions" is for inline volumes: set spec.mountOptions/,
  );
  assert.equal(validatePublish(req(), ROOT).ephemeral, false);
});

Deno.test("validatePublish() rejects bad requests with InvalidArgument", async (t) => {
  const cases: [string, Partial<NodePublishVolumeRequest>, RegExp][] = [
    ["no volume id", { volumeId: "" }, /Volume ID not provided/],
    ["no target", { targetPath: "" }, /Target path not provided/],
    ["relative target", { targetPath: "pods/x" }, /absolute path/],
    ["dotdot", { targetPath: `${ROOT}/pods/../x/volumes/kubernetes.io~csi/p/mount` }, /"\.\."/],
    ["outside", { targetPath: "/tmp/pods/u/volumes/kubernetes.io~csi/p/mount" }, /not a kubelet/],
    ["no capability", { volumeCapability: null }, /Volume capability not provided/],
    [
      "block",
      { volumeCapability: { block: {}, accessMode: { mode: "SINGLE_NODE_WRITER" } } },
      /Block/,
    ],
    ["mode", { volumeCapability: { mount: {}, accessMode: { mode: "UNKNOWN" } } }, /UNKNOWN/],
    ["no bucket", { volumeContext: {} }, /Bucket name not provided/],
    ["bad bucket", { volumeContext: { bucketName: "a" } }, /not a valid S3 bucket name/],
    ["auth", { volumeContext: { bucketName: "b-1", authenticationSource: "x" } }, /Unknown auth/],
    ["engine", { volumeContext: { bucketName: "b-1", engine: "s3fs" } }, /Unknown engine "s3fs"/],
    [
      "pod uid mismatch",
      { volumeContext: { bucketName: "b-1", "csi.storage.k8s.io/pod.uid": "other" } },
      /does not match/,
    ],
    [
      "endpoint with credentials",
      { secrets: { endpoint: "https://AKIA:pw@s3.example.com" } },
      /^Node-publish Secret key "endpoint" contains a user name or password/,
    ],
    [
      "endpoint with a path",
      { secrets: { endpoint: "https://s3.example.com/a" } },
      /^Node-publish Secret key "endpoint" "https:\/\/s3.example.com\/a" has a path/,
    ],
    [
      "endpoint scheme",
      { secrets: { endpoint: "s3://bucket" } },
      /key "endpoint" "s3:\/\/bucket" has scheme "s3": use http or https/,
    ],
    [
      "secret region",
      { secrets: { region: "Site B" } },
      /key "region" \("Site B"\) is not a region/,
    ],
    [
      "bad fsGroup",
      {
        volumeCapability: {
          mount: { volumeMountGroup: "wheel" },
          accessMode: { mode: "SINGLE_NODE_WRITER" },
        },
      },
      /not a numeric group id/,
    ],
  ];
  for (const [name, more, re] of cases) {
    await t.step(name, () => {
      assert.throws(
        () => validatePublish(req(more), ROOT),
        (e: unknown) => e instanceof CsiError && e.code === 3 && re.test(e.message),
      );
    });
  }
});

Deno.test("checkTargetPath() names the field", () => {
  assert.throws(() => checkTargetPath(ROOT, "", "Volume path"), /Volume path not provided/);
});

Deno.test("validatePublish(): every volume option renders to an argument the mounter accepts", () => {
  for (const spec of MOUNT_OPTION_SPECS.filter((s) => s.status === "volume")) {
    for (const flag of spec.value ? spec.examples!.map((v) => `${spec.name}=${v}`) : [spec.name]) {
      const p = validatePublish(
        req({
          volumeCapability: {
            mount: { mountFlags: [flag, ...(spec.needs ?? [])] },
            accessMode: { mode: "MULTI_NODE_MULTI_WRITER" },
          },
        }),
        ROOT,
      );
      for (const arg of renderArgs(p.options)) assert.equal(mountArgProblem(arg), undefined, arg);
      assert.ok(p.options.has(spec.name), `${flag} reaches the engine`);
    }
  }
});

Deno.test("validatePublish(): allow-root is honoured (no allow-other), both at once are refused", () => {
  const p = validatePublish(withFlags(["allow-root"]), ROOT);
  assert.equal(p.options.has("allow-root"), true);
  assert.equal(p.options.has("allow-other"), false);
  refuses(
    withFlags(["allow-root", "allow-other"]),
    /"allow-other" and "allow-root" cannot be combined/,
  );
  refuses(
    withFlags(["allow-root", "allow-delete", "allow-overwrite"], { engine: "rclone" }),
    /rclone engine cannot honour the mount option "allow-root" \(rclone cannot restrict/,
  );
});

Deno.test("validatePublish(): foreground is dropped; uid/gid 0 and fsGroup 0 are refused", () => {
  const p = validatePublish(withFlags(["-f", "allow-delete"]), ROOT);
  assert.equal(p.options.has("foreground"), false);
  refuses(withFlags(["uid=0"]), /"uid=0" is invalid: must be a user id from 1/);
  refuses(
    req({
      volumeCapability: {
        mount: { volumeMountGroup: "0" },
        accessMode: { mode: "SINGLE_NODE_WRITER" },
      },
    }),
    /Volume mount group "0" \(the pod's fsGroup 0, root\)/,
  );
});

Deno.test("validatePublish(): combinations of the new upstream options", () => {
  for (
    const [flags, ctx, re] of [
      [
        ["no-log", "log-metrics"],
        {},
        /"no-log" cannot be combined with "debug", "debug-crt" or "log-metrics"/,
      ],
      [["otlp-export-interval=5"], {}, /"otlp-export-interval=5" needs "otlp-endpoint=<URL>"/],
      [
        ["no-sign-request"],
        { authenticationSource: "secret" },
        /"no-sign-request" sends no credentials/,
      ],
      [
        ["upload-checksums=crc64nvme", "allow-delete", "allow-overwrite"],
        { engine: "rclone" },
        /cannot honour "upload-checksums=crc64nvme" \(only "off"\)/,
      ],
      [
        ["memory-target=1024", "allow-delete", "allow-overwrite"],
        { engine: "rclone" },
        /"memory-target=1024" \(rclone has no memory target/,
      ],
    ] as const
  ) refuses(withFlags([...flags], ctx), re);
  const p = validatePublish(
    withFlags([
      "requester-pays",
      "no-sign-request",
      "infer-content-type",
      "allow-delete",
      "allow-overwrite",
    ], { engine: "rclone" }),
    ROOT,
  );
  assert.equal(p.options.has("no-sign-request"), true);
});

Deno.test("validatePublish(): a newline in an option is refused before anything is mounted", () => {
  for (const flag of ["cache=/x\ny", "prefix=a/\n", "debug\n"]) {
    assert.throws(
      () =>
        validatePublish(
          req({
            volumeCapability: {
              mount: { mountFlags: [flag] },
              accessMode: { mode: "MULTI_NODE_MULTI_WRITER" },
            },
          }),
          ROOT,
        ),
      (e: unknown) => e instanceof CsiError && e.code === 3 && /control characters/.test(e.message),
      flag,
    );
  }
});

function withFlags(
  mountFlags: string[],
  context: Record<string, string> = {},
): NodePublishVolumeRequest {
  return req({
    volumeCapability: { mount: { mountFlags }, accessMode: { mode: "MULTI_NODE_MULTI_WRITER" } },
    volumeContext: { bucketName: "bucket-1", "csi.storage.k8s.io/pod.uid": "uid-1", ...context },
  });
}

function refuses(r: NodePublishVolumeRequest, re: RegExp, defaultEngine?: "mount-s3" | "rclone") {
  assert.throws(
    () => validatePublish(r, ROOT, defaultEngine),
    (e: unknown) => e instanceof CsiError && e.code === 3 && re.test(e.message),
  );
}

Deno.test("validatePublish(): the engine is the volume's, else the node's default, else mount-s3", () => {
  assert.equal(validatePublish(req(), ROOT).engine, "mount-s3");
  const rcloneVolume = withFlags(["allow-delete", "allow-overwrite"]);
  assert.equal(validatePublish(rcloneVolume, ROOT, "rclone").engine, "rclone");
  assert.equal(
    validatePublish(withFlags(["allow-delete"], { engine: "mount-s3" }), ROOT, "rclone").engine,
    "mount-s3",
  );
  refuses(withFlags([], { engine: "goofys" }), /Unknown engine "goofys"/);
});

Deno.test("validatePublish(): rclone never silently weaker: refused before anything is mounted", () => {
  for (
    const [flags, re] of [
      [["allow-delete"], /rclone engine cannot refuse overwrites.*allow-overwrite/],
      [["allow-overwrite"], /rclone engine cannot refuse deletes.*allow-delete/],
      [[], /rclone engine cannot refuse deletes or overwrites/],
      [["allow-delete", "allow-overwrite", "negative-metadata-ttl=5"], /"negative-metadata-ttl=5"/],
      [["allow-delete", "allow-overwrite", "aws-max-attempts=3"], /"aws-max-attempts=3"/],
      [["allow-delete", "allow-overwrite", "upload-checksums=crc32c"], /only "off"/],
    ] as const
  ) {
    refuses(withFlags([...flags], { engine: "rclone" }), re);
    refuses(withFlags([...flags]), re, "rclone");
  }
  // Read-only volumes and volumes allowing both are fine.
  validatePublish(withFlags(["read-only"], { engine: "rclone" }), ROOT);
  validatePublish(
    req({
      volumeCapability: {
        mount: { mountFlags: [] },
        accessMode: { mode: "MULTI_NODE_READER_ONLY" },
      },
      volumeContext: { bucketName: "b-1", engine: "rclone" },
    }),
    ROOT,
  );
  validatePublish(withFlags(["allow-delete", "allow-overwrite"], { engine: "rclone" }), ROOT);
});

Deno.test("validatePublish(): option values and combinations mount-s3 refuses are refused here", () => {
  for (
    const [flags, re] of [
      [["aws-max-attempts=0"], /aws-max-attempts=0.*from 1 to 100/],
      [["aws-max-attempts=101"], /from 1 to 100/],
      [["part-size=1048576"], /from 5242880 \(5 MiB\)/],
      [["write-part-size=6000000000"], /to 5368709120/],
      [["max-threads=0"], /from 1 to 4096/],
      [["maximum-throughput-gbps=0"], /positive number/],
      [["sse-kms-key-id=k1"], /"sse-kms-key-id=k1" needs "sse=aws:kms"/],
      [["sse=AES256", "sse-kms-key-id=k1"], /the volume has sse=AES256/],
      [["no-log", "debug"], /"no-log" cannot be combined/],
      [["max-cache-size=100"], /needs a local cache: set the volume attribute cache/],
    ] as const
  ) refuses(withFlags([...flags]), re);
  validatePublish(withFlags(["sse=aws:kms:dsse", "sse-kms-key-id=k1", "aws-max-attempts=1"]), ROOT);
});

Deno.test("validatePublish(): a local cache goes to /cache within the emptyDir's limit", () => {
  const none = validatePublish(req(), ROOT);
  assert.equal(none.cache, undefined);
  assert.equal(none.options.has("cache"), false);

  const limited = validatePublish(
    withFlags(["allow-delete"], { cache: "emptyDir", cacheEmptyDirSizeLimit: "1Gi" }),
    ROOT,
  );
  assert.equal(limited.options.get("cache"), "/cache");
  assert.equal(limited.options.get("max-cache-size"), "972", "95 % of 1024 MiB");
  assert.deepEqual(limited.cache, { type: "emptyDir", sizeLimit: "1Gi", sizeLimitBytes: 2 ** 30 });

  const smaller = validatePublish(
    withFlags(["max-cache-size=100"], { cache: "emptyDir", cacheEmptyDirSizeLimit: "1Gi" }),
    ROOT,
  );
  assert.equal(smaller.options.get("max-cache-size"), "100");
  const capped = validatePublish(
    withFlags(["max-cache-size=1000"], { cache: "emptyDir", cacheEmptyDirSizeLimit: "1Gi" }),
    ROOT,
  );
  assert.equal(capped.options.get("max-cache-size"), "972");
  refuses(
    withFlags(["max-cache-size=2000"], { cache: "emptyDir", cacheEmptyDirSizeLimit: "1Gi" }),
    /max-cache-size=2000 \(MiB\) exceeds cacheEmptyDirSizeLimit="1Gi" \(1024 MiB\)/,
  );

  const ephemeral = validatePublish(
    withFlags([], {
      cache: "ephemeral",
      cacheEphemeralStorageClassName: "local-ssd",
      cacheEphemeralStorageResourceRequest: "10Gi",
    }),
    ROOT,
  );
  assert.equal(ephemeral.options.get("cache"), "/cache");
  assert.equal(ephemeral.options.has("max-cache-size"), false, "the engine keeps 5 % free");

  // The deprecated mount option: its path not used, an emptyDir with the default limit (as the
  // controller gives the pod's volume), the engine's cache within it.
  const legacy = validatePublish(withFlags(["cache=/var/cache/x"]), ROOT);
  assert.equal(legacy.options.get("cache"), "/cache");
  assert.deepEqual(legacy.cache, {
    type: "emptyDir",
    fromMountOption: true,
    sizeLimit: "10Gi",
    sizeLimitBytes: 10 * 2 ** 30,
    defaultSizeLimit: true,
  });
  assert.equal(legacy.options.get("max-cache-size"), "9728", "95 % of the default 10Gi");
  const unlimited = validatePublish(withFlags([], { cache: "emptyDir" }), ROOT, "mount-s3", "2Gi");
  assert.equal(unlimited.options.get("max-cache-size"), "1945", "95 % of the configured 2Gi");
  refuses(
    withFlags(["max-cache-size=20000"], { cache: "emptyDir" }),
    /max-cache-size=20000 \(MiB\) exceeds the default cache size limit "10Gi" \(10240 MiB\) of a cache without cacheEmptyDirSizeLimit/,
  );
  const tmpfs = validatePublish(
    withFlags([], { cache: "emptyDir", cacheEmptyDirMedium: "Memory" }),
    ROOT,
  );
  assert.equal(tmpfs.options.has("max-cache-size"), false, "a tmpfs cache keeps no default limit");

  for (
    const [flags, ctx, re] of [
      [[], { cache: "tmpfs" }, /cache="tmpfs" is not a cache type: use emptyDir or ephemeral/],
      [["cache=/x"], { cache: "emptyDir" }, /both by the mount option "cache" and the volume/],
      [[], { cacheEmptyDirSizeLimit: "1Gi" }, /cacheEmptyDirSizeLimit is set but cache is not/],
      [[], { cache: "emptyDir", cacheEmptyDirSizeLimit: "lots" }, /not a positive size/],
      [[], { cache: "emptyDir", cacheEmptyDirMedium: "HugePages" }, /Memory \(tmpfs\)/],
      [[], { cache: "ephemeral" }, /needs both cacheEphemeralStorageClassName/],
      [[], {
        cache: "emptyDir",
        cacheEphemeralStorageClassName: "x",
      }, /applies to cache: ephemeral, not emptyDir/],
    ] as const
  ) refuses(withFlags([...flags], ctx), re);
});
