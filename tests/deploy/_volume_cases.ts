/**
 * Cases for the admission policies of volumes (`src/deploy/render_volume_policy.ts`): one
 * accepted and one refused case (at least) for every rule of the allow-lists — each mount option
 * row, each volume attribute, each StorageClass parameter — with the message the node plugin
 * (`validatePublish()`) or the provisioner (`parseParameters()`) gives for the same object,
 * computed here by calling them.
 *
 * @module
 */
import type { NodePublishVolumeRequest } from "../../src/csi/gen/csi_types.ts";
import { CsiError } from "../../src/csi/errors.ts";
import { DEFAULT_ENGINE } from "../../src/mppod/mount_message.ts";
import {
  INTERNAL_OPTIONS,
  MAX_MOUNT_OPTIONS,
  MOUNT_OPTION_SPECS,
  REFUSED_FORMS,
} from "../../src/mppod/mount_option_spec.ts";
import { mountOptionsProblem } from "../../src/node/mount_options.ts";
import { validatePublish } from "../../src/node/publish_request.ts";
import { parseParameters } from "../../src/provisioning/parameters.ts";
import { TOLERATED } from "../../src/options/storage_class_parameters.ts";
import { DRIVER_NAME } from "../../src/util/version.ts";

/** A PersistentVolume or StorageClass and what the driver says of it. */
export interface VolumeCase {
  readonly name: string;
  readonly kind: "PersistentVolume" | "StorageClass";
  /** The object, without metadata.name (the test names it). */
  readonly object: Record<string, unknown>;
  /** Whether the case is meant to be accepted (checked against the driver's own answer). */
  readonly accepted: boolean;
}

const KUBELET = "/var/lib/kubelet";
const POD_UID = "0d1b2c3d-0000-4000-8000-000000000001";

function capability(mode: string, flags: string[]): NonNullable<
  NodePublishVolumeRequest["volumeCapability"]
> {
  const csi = {
    ReadWriteOnce: "SINGLE_NODE_WRITER",
    ReadOnlyMany: "MULTI_NODE_READER_ONLY",
    ReadWriteMany: "MULTI_NODE_MULTI_WRITER",
    ReadWriteOncePod: "SINGLE_NODE_SINGLE_WRITER",
  }[mode] ?? "UNKNOWN";
  return {
    mount: { mountFlags: flags },
    accessMode: { mode: csi as "MULTI_NODE_MULTI_WRITER" },
  };
}

interface PvShape {
  spec: {
    accessModes?: string[];
    mountOptions?: string[];
    csi: { driver: string; volumeHandle: string; volumeAttributes?: Record<string, string> };
  };
}

/**
 * The node plugin's answer for a PV, as kubelet would publish it (its first access mode, its
 * mount options and attributes): the InvalidArgument message, or undefined when accepted.
 */
export function nodeMessage(
  pv: Record<string, unknown>,
  name = "pv-case",
  defaultEngine = DEFAULT_ENGINE,
): string | undefined {
  const spec = (pv as unknown as PvShape).spec;
  try {
    validatePublish(
      {
        volumeId: spec.csi.volumeHandle,
        targetPath: `${KUBELET}/pods/${POD_UID}/volumes/kubernetes.io~csi/${name}/mount`,
        volumeCapability: capability(
          spec.accessModes?.[0] ?? "ReadWriteOnce",
          spec.mountOptions ?? [],
        ),
        volumeContext: { ...spec.csi.volumeAttributes },
      },
      KUBELET,
      defaultEngine,
    );
    return undefined;
  } catch (err) {
    if (err instanceof CsiError) return err.message;
    throw err;
  }
}

/**
 * The provisioner's answer for a StorageClass (its parameters as CreateVolume gets them), then
 * the node's for its mount options: the message, or undefined when accepted.
 */
export function provisionerMessage(sc: Record<string, unknown>): string | undefined {
  const s = sc as { parameters?: Record<string, string>; mountOptions?: string[] };
  try {
    parseParameters(s.parameters ?? {});
  } catch (err) {
    if (err instanceof CsiError) return err.message;
    throw err;
  }
  return mountOptionsProblem(s.mountOptions ?? []);
}

function pv(
  mountOptions: string[],
  attributes: Record<string, string> = {},
  accessModes = ["ReadWriteMany"],
): Record<string, unknown> {
  return {
    apiVersion: "v1",
    kind: "PersistentVolume",
    spec: {
      capacity: { storage: "1Gi" },
      accessModes,
      persistentVolumeReclaimPolicy: "Retain",
      ...(mountOptions.length ? { mountOptions } : {}),
      csi: {
        driver: DRIVER_NAME,
        volumeHandle: "vol-case",
        volumeAttributes: { bucketName: "bucket-1", ...attributes },
      },
    },
  };
}

function sc(parameters: Record<string, string>, mountOptions: string[] = []) {
  return {
    apiVersion: "storage.k8s.io/v1",
    kind: "StorageClass",
    provisioner: DRIVER_NAME,
    parameters,
    ...(mountOptions.length ? { mountOptions } : {}),
  };
}

/** Every PersistentVolume case. */
export function volumeCases(): VolumeCase[] {
  const out: VolumeCase[] = [];
  const add = (
    name: string,
    accepted: boolean,
    options: string[],
    attributes: Record<string, string> = {},
    accessModes?: string[],
  ) =>
    out.push({
      name,
      kind: "PersistentVolume",
      object: pv(options, attributes, accessModes),
      accepted,
    });
  // Every option row of the list.
  for (const s of MOUNT_OPTION_SPECS) {
    const needs = s.needs ?? [];
    if (s.status === "volume") {
      for (const e of s.value ? s.examples!.map((x) => `${s.name}=${x}`) : [s.name]) {
        add(`option ${e}`, true, [e, ...needs]);
      }
      for (const bad of s.invalid ?? []) {
        add(`option ${s.name}=${bad}`, false, [`${s.name}=${bad}`, ...needs]);
      }
      if (s.value) add(`option ${s.name} without a value`, false, [s.name]);
      else add(`option ${s.name}=x (a flag)`, false, [`${s.name}=x`]);
    } else if (s.status === "ignored") {
      add(`option ${s.name} (accepted, dropped)`, true, [s.name]);
      add(`option ${s.name} twice`, false, [s.name, `--${s.name}`]);
    } else {
      add(`option ${s.name} (${s.status})`, false, [s.value ? `--${s.name}=x` : `--${s.name}`]);
    }
    for (const c of s.short ?? []) {
      add(`option -${c}`, s.status === "volume" || s.status === "ignored", [`-${c}`]);
    }
  }
  for (const form of Object.keys(REFUSED_FORMS)) {
    add(`form -${form}`, false, [`-${form} allow_other`]);
  }
  for (const name of INTERNAL_OPTIONS) add(`internal ${name}`, false, [`--${name}=x`]);
  // Entry syntax.
  add("syntax: dashes, spaces, blank entries", true, [
    "--allow-delete",
    " region us-west-2 ",
    "",
    "  ",
  ]);
  add("syntax: unknown option", false, ["allow-delete", "rw"]);
  add("syntax: duplicate", false, ["uid=1000", "uid 1000"]);
  add("syntax: duplicate through a short form", false, ["debug", "-d"]);
  add("syntax: control characters", false, ["allow-delete", "region=us-east-1\n--endpoint-url=x"]);
  add("syntax: an empty name", false, ["=x"]);
  add("syntax: the first problem wins", false, ["rw", "uid=0", "endpoint-url=x"]);
  add(
    "syntax: 64 entries",
    true,
    Array.from({ length: MAX_MOUNT_OPTIONS }, () => "allow-delete").map((o, i) => i === 0 ? o : ""),
  );
  add("syntax: 65 entries", false, Array.from({ length: MAX_MOUNT_OPTIONS + 1 }, () => ""));
  add("syntax: a value with Unicode spaces", true, ["prefix=\u00a0équipe/\u3000"]);
  // Volume attributes.
  out.push({
    name: "attribute: no bucketName",
    kind: "PersistentVolume",
    object: pvWithout("bucketName"),
    accepted: false,
  });
  add("attribute: bucketName invalid", false, [], { bucketName: "a" });
  add("attribute: bucketName with ..", false, [], { bucketName: "a..b" });
  add("attribute: bucketName long", false, [], { bucketName: "b".repeat(100) });
  add("attribute: bucketName upper case (accepted by the node)", true, [], {
    bucketName: "Bucket_1",
  });
  add("attribute: authenticationSource secret", true, [], { authenticationSource: "secret" });
  add("attribute: authenticationSource pod", true, [], { authenticationSource: "pod" });
  add("attribute: authenticationSource unknown", false, [], { authenticationSource: "iam" });
  add("attribute: authenticationSource pod on rclone", false, [], {
    authenticationSource: "pod",
    engine: "rclone",
  });
  add("attribute: mountOptions is for inline volumes", false, [], {
    mountOptions: "allow-delete",
  });
  add("attribute: engine unknown", false, [], { engine: "s3fs" });
  add("attribute: engine mount-s3", true, [], { engine: "mount-s3" });
  add("attribute: prefix", true, [], { prefix: "data/" });
  add("attribute: prefix invalid", false, [], { prefix: "data" });
  add("attribute: prefix blank", false, [], { prefix: "  " });
  add("attribute: prefix with a control character", false, [], { prefix: "a/\t" });
  add("attribute: prefix equal to the option", true, ["prefix=data/"], { prefix: "data/" });
  add("attribute: prefix conflicting with the option", false, ["prefix=a/"], { prefix: "b/" });
  add("attribute: region", true, [], { region: "eu-west-1" });
  add("attribute: region invalid", false, [], { region: "EU" });
  add("attribute: region conflicting with the option", false, ["region=us-east-1"], {
    region: "eu-west-1",
  });
  // Combinations.
  add("combination: sse-kms-key-id without sse", false, ["sse-kms-key-id=k"]);
  add("combination: sse-kms-key-id with sse=AES256", false, ["sse=AES256", "sse-kms-key-id=k"]);
  add("combination: sse-kms-key-id with sse=aws:kms:dsse", true, [
    "sse=aws:kms:dsse",
    "sse-kms-key-id=k",
  ]);
  add("combination: no-log with debug", false, ["no-log", "debug"]);
  add("combination: no-log with log-metrics", false, ["log-metrics", "no-log"]);
  add("combination: allow-other with allow-root", false, ["allow-root", "allow-other"]);
  add("combination: otlp-export-interval without an endpoint", false, ["otlp-export-interval=5"]);
  add("combination: no-sign-request with a secret", false, ["no-sign-request"], {
    authenticationSource: "secret",
  });
  // The local cache.
  const c = (attrs: Record<string, string>) => attrs;
  add("cache: emptyDir", true, [], c({ cache: "emptyDir" }));
  add(
    "cache: emptyDir with limit and medium",
    true,
    ["max-cache-size=100"],
    c({ cache: "emptyDir", cacheEmptyDirSizeLimit: "1Gi", cacheEmptyDirMedium: "Memory" }),
  );
  add(
    "cache: ephemeral",
    true,
    [],
    c({
      cache: "ephemeral",
      cacheEphemeralStorageClassName: "local-ssd",
      cacheEphemeralStorageResourceRequest: "10Gi",
    }),
  );
  add("cache: legacy mount option", true, ["cache=/var/cache/x", "max-cache-size=10"]);
  add("cache: unknown type", false, [], c({ cache: "tmpfs" }));
  add("cache: both the option and the attribute", false, ["cache=/x"], c({ cache: "emptyDir" }));
  add("cache: a limit without a cache", false, [], c({ cacheEmptyDirSizeLimit: "1Gi" }));
  add(
    "cache: a storage class without a cache",
    false,
    [],
    c({ cacheEphemeralStorageClassName: "x" }),
  );
  add(
    "cache: emptyDir with an ephemeral attribute",
    false,
    [],
    c({ cache: "emptyDir", cacheEphemeralStorageResourceRequest: "1Gi" }),
  );
  add(
    "cache: emptyDir with a bad medium",
    false,
    [],
    c({ cache: "emptyDir", cacheEmptyDirMedium: "HugePages" }),
  );
  add(
    "cache: emptyDir with a bad limit",
    false,
    [],
    c({ cache: "emptyDir", cacheEmptyDirSizeLimit: "lots" }),
  );
  add(
    "cache: emptyDir with a zero limit",
    false,
    [],
    c({ cache: "emptyDir", cacheEmptyDirSizeLimit: "0" }),
  );
  add(
    "cache: emptyDir with a limit too small",
    false,
    [],
    c({ cache: "emptyDir", cacheEmptyDirSizeLimit: "1Mi" }),
  );
  add(
    "cache: emptyDir with the smallest limit",
    true,
    [],
    c({ cache: "emptyDir", cacheEmptyDirSizeLimit: "1103765" }),
  );
  add(
    "cache: max-cache-size above the limit",
    false,
    ["max-cache-size=2000"],
    c({ cache: "emptyDir", cacheEmptyDirSizeLimit: "1Gi" }),
  );
  add(
    "cache: max-cache-size at the limit",
    true,
    ["max-cache-size=1024"],
    c({ cache: "emptyDir", cacheEmptyDirSizeLimit: "1Gi" }),
  );
  add("cache: max-cache-size without a cache", false, ["max-cache-size=100"]);
  // A disk emptyDir without a limit gets the deployment's default limit (10Gi = 10240 MiB).
  add(
    "cache: max-cache-size above the default limit",
    false,
    ["max-cache-size=10241"],
    c({ cache: "emptyDir" }),
  );
  add(
    "cache: max-cache-size at the default limit",
    true,
    ["max-cache-size=10240"],
    c({
      cache: "emptyDir",
    }),
  );
  add("cache: legacy option, max-cache-size above the default limit", false, [
    "cache=/var/cache/x",
    "max-cache-size=10241",
  ]);
  add(
    "cache: a tmpfs emptyDir has no default limit",
    true,
    ["max-cache-size=20000"],
    c({ cache: "emptyDir", cacheEmptyDirMedium: "Memory" }),
  );
  add(
    "cache: ephemeral with an emptyDir attribute",
    false,
    [],
    c({ cache: "ephemeral", cacheEmptyDirMedium: "Memory" }),
  );
  add(
    "cache: ephemeral without a request",
    false,
    [],
    c({ cache: "ephemeral", cacheEphemeralStorageClassName: "x" }),
  );
  add(
    "cache: ephemeral with a bad class",
    false,
    [],
    c({
      cache: "ephemeral",
      cacheEphemeralStorageClassName: "Bad_Class",
      cacheEphemeralStorageResourceRequest: "1Gi",
    }),
  );
  add(
    "cache: ephemeral with a bad request",
    false,
    [],
    c({
      cache: "ephemeral",
      cacheEphemeralStorageClassName: "x",
      cacheEphemeralStorageResourceRequest: "-1Gi",
    }),
  );
  // The rclone engine.
  const rclone = { engine: "rclone" };
  add("rclone: writable with both allows", true, [
    "allow-delete",
    "allow-overwrite",
    "requester-pays",
    "upload-checksums=off",
  ], rclone);
  add("rclone: an option it cannot honour", false, [
    "allow-delete",
    "allow-overwrite",
    "memory-target=1024",
  ], rclone);
  add(
    "rclone: a flag it cannot honour",
    false,
    ["allow-delete", "allow-overwrite", "log-metrics"],
    rclone,
  );
  add("rclone: a value it cannot honour", false, [
    "allow-delete",
    "allow-overwrite",
    "upload-checksums=crc32c",
  ], rclone);
  add("rclone: writable without allow-delete", false, ["allow-overwrite"], rclone);
  add("rclone: writable without either", false, [], rclone);
  add("rclone: read-only by option", true, ["read-only"], rclone);
  add("rclone: read-only by the access mode", true, [], rclone, ["ReadOnlyMany"]);
  add("rclone: writable access mode first", false, [], rclone, ["ReadWriteMany", "ReadOnlyMany"]);
  return out;
}

function pvWithout(attribute: string): Record<string, unknown> {
  const o = pv([]);
  const attrs = ((o.spec as PvShape["spec"]).csi.volumeAttributes)!;
  delete attrs[attribute];
  return o;
}

/** Every StorageClass case. */
export function storageClassCases(): VolumeCase[] {
  const out: VolumeCase[] = [];
  const add = (
    name: string,
    accepted: boolean,
    parameters: Record<string, string>,
    mountOptions: string[] = [],
  ) => out.push({ name, kind: "StorageClass", object: sc(parameters, mountOptions), accepted });
  add("no parameters", true, {});
  add("every parameter of bucket mode", true, {
    mode: "bucket",
    bucketNamePrefix: "team-a-",
    deletePolicy: "retain",
    region: "us-east-1",
    authenticationSource: "secret",
    engine: "rclone",
    cache: "emptyDir",
    cacheEmptyDirSizeLimit: "2Gi",
    cacheEmptyDirMedium: "Memory",
  });
  add("prefix mode", true, { mode: "prefix", bucketName: "shared-bucket", basePrefix: "volumes/" });
  add("the sidecar's keys", true, Object.fromEntries(TOLERATED.map((k) => [k, "x"])));
  add("one unknown key", false, { deletepolicy: "retain" });
  add("several unknown keys", false, { zeta: "1", alpha: "2", mode: "bucket", beta: "3" });
  add("mode unknown", false, { mode: "folder" });
  add("deletePolicy unknown", false, { deletePolicy: "delete" });
  add("prefix mode without bucketName", false, { mode: "prefix" });
  for (
    const bad of [
      "ab",
      "b".repeat(64),
      "Bucket",
      "-bucket",
      "bucket-",
      "a..b",
      "192.168.1.10",
      "xn--bucket",
      "sthree-x",
      "amzn-s3-demo-x",
      "b-s3alias",
      "b--ol-s3",
      "b.mrap",
      "b--x-s3",
      "b--table-s3",
    ]
  ) add(`prefix mode, bucketName ${bad.slice(0, 20)}`, false, { mode: "prefix", bucketName: bad });
  add("prefix mode with bucketNamePrefix", false, {
    mode: "prefix",
    bucketName: "b-1",
    bucketNamePrefix: "x-",
  });
  for (const bad of ["x".repeat(41), "vol umes/", "/volumes/", "volumes", "a//", "a/./", "../a/"]) {
    add(`prefix mode, basePrefix ${bad.slice(0, 20)}`, false, {
      mode: "prefix",
      bucketName: "b-1",
      basePrefix: bad,
    });
  }
  add("bucket mode with bucketName", false, { bucketName: "b-1" });
  add("bucket mode with basePrefix", false, { basePrefix: "v/" });
  for (
    const bad of ["x".repeat(33), "-team", "Team", "a..b", "xn--x", "sthree-", "amzn-s3-demo-"]
  ) {
    add(`bucketNamePrefix ${bad.slice(0, 20)}`, false, { bucketNamePrefix: bad });
  }
  add("bucketNamePrefix that only starts a reserved prefix", true, { bucketNamePrefix: "xn" });
  add("region invalid", false, { region: "US" });
  add("authenticationSource invalid", false, { authenticationSource: "pod" });
  add("engine invalid", false, { engine: "goofys" });
  add("cache type invalid", false, { cache: "hostPath" });
  add("cache attribute without cache", false, { cacheEphemeralStorageClassName: "x" });
  add("cache ephemeral incomplete", false, {
    cache: "ephemeral",
    cacheEphemeralStorageResourceRequest: "1Gi",
  });
  add("cache emptyDir bad limit", false, { cache: "emptyDir", cacheEmptyDirSizeLimit: "big" });
  add("mount options accepted", true, {}, ["allow-delete", "-d", "foreground"]);
  add("mount options refused", false, {}, ["allow-delete", "endpoint-url=http://x"]);
  add("mount options after parameters", false, { mode: "folder" }, ["rw"]);
  return out;
}

/** The driver's own answer for a case. */
export function driverMessage(c: VolumeCase, name?: string): string | undefined {
  return c.kind === "PersistentVolume" ? nodeMessage(c.object, name) : provisionerMessage(c.object);
}
