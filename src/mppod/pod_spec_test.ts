import assert from "node:assert/strict";
import {
  hasCacheMountOption,
  mountpointPod,
  type MountpointPodConfig,
  MountpointPodSpecError,
  type MountpointPodTarget,
} from "./pod_spec.ts";

const CONFIG: MountpointPodConfig = {
  namespace: "mount-s3",
  image: "mounter:test",
  imagePullPolicy: "IfNotPresent",
  command: "/bin/s3-csi-mounter",
  driverVersion: "1.0.0",
  mountpointVersion: "mount-s3",
  priorityClassName: "",
  uid: 1000,
  terminationGraceSeconds: 600,
  extraLabels: {},
  cpuRequest: "",
  memoryRequest: "",
  memoryLimit: "",
  caConfigMap: "",
};

function target(attrs: Record<string, string>, mountOptions: string[] = []): MountpointPodTarget {
  return {
    name: "mp-1",
    attachmentName: "s3pa-1",
    spec: {
      nodeName: "node-1",
      persistentVolumeName: "pv-1",
      volumeID: "vol-1",
      mountOptions: mountOptions.join(","),
      workloadFSGroup: "",
      authenticationSource: "driver",
    },
    volumeAttributes: { bucketName: "b", ...attrs },
    mountOptions,
  };
}

function env(pod: ReturnType<typeof mountpointPod>): Record<string, string> {
  return Object.fromEntries(
    (pod.spec.containers[0]!.env ?? []).map((e) => [e.name, String(e.value)]),
  );
}

Deno.test("mountpointPod(): no cache volume without a cache; comm and work only", () => {
  const pod = mountpointPod(CONFIG, target({}));
  assert.deepEqual(pod.spec.volumes!.map((v) => v.name), ["comm", "work"]);
  assert.equal(env(pod).MOUNTER_CACHE_DIR, undefined);
  assert.equal(env(pod).MOUNTER_CA_BUNDLE, undefined);
});

Deno.test("mountpointPod(): a cache volume at /cache, named to the mounter", () => {
  const pod = mountpointPod(
    CONFIG,
    target({ cache: "emptyDir", cacheEmptyDirSizeLimit: "2Gi", cacheEmptyDirMedium: "Memory" }),
  );
  assert.deepEqual(pod.spec.volumes!.find((v) => v.name === "cache"), {
    name: "cache",
    emptyDir: { medium: "Memory", sizeLimit: "2Gi" },
  });
  assert.deepEqual(
    pod.spec.containers[0]!.volumeMounts!.find((m) => m.name === "cache"),
    { name: "cache", mountPath: "/cache" },
  );
  assert.equal(env(pod).MOUNTER_CACHE_DIR, "/cache");
  // The comm dir stays small and memory-backed: the cache is never there.
  assert.deepEqual(pod.spec.volumes!.find((v) => v.name === "comm"), {
    name: "comm",
    emptyDir: { medium: "Memory", sizeLimit: "10Mi" },
  });

  const eph = mountpointPod(
    CONFIG,
    target({
      cache: "ephemeral",
      cacheEphemeralStorageClassName: "nvme",
      cacheEphemeralStorageResourceRequest: "10Gi",
    }),
  );
  const vol = eph.spec.volumes!.find((v) => v.name === "cache") as Record<string, unknown>;
  assert.ok(vol.ephemeral, "a generic ephemeral volume");
  assert.equal(env(eph).MOUNTER_CACHE_DIR, "/cache");

  const legacy = mountpointPod(CONFIG, target({}, ["allow-delete", "cache /var/tmp/c"]));
  assert.deepEqual(legacy.spec.volumes!.find((v) => v.name === "cache"), {
    name: "cache",
    emptyDir: { sizeLimit: "10Gi" },
  });
});

Deno.test("mountpointPod(): local disk is bounded — work and disk caches have a size limit, the container an ephemeral-storage limit over both and its logs", () => {
  const limits = (pod: ReturnType<typeof mountpointPod>) => ({
    work: pod.spec.volumes!.find((v) => v.name === "work")!.emptyDir,
    cache: pod.spec.volumes!.find((v) => v.name === "cache")?.emptyDir,
    container: pod.spec.containers[0]!.resources?.limits?.["ephemeral-storage"],
  });
  // Defaults: work 256Mi; logs 128Mi.
  assert.deepEqual(limits(mountpointPod(CONFIG, target({}))), {
    work: { sizeLimit: "256Mi" },
    cache: undefined,
    container: "384Mi",
  });
  // The deprecated cache mount option, and cache: emptyDir without a limit: the default limit.
  for (
    const t of [
      target({}, ["cache /var/tmp/c"]),
      target({ cache: "emptyDir" }),
    ]
  ) {
    assert.deepEqual(limits(mountpointPod(CONFIG, t)), {
      work: { sizeLimit: "256Mi" },
      cache: { sizeLimit: "10Gi" },
      container: `${10 * 1024 + 384}Mi`,
    });
  }
  // The PV's limit, the configured sizes; a tmpfs cache counts as memory, not disk.
  const sized = { ...CONFIG, workSizeLimit: "1Gi", cacheSizeLimit: "50Gi" };
  assert.deepEqual(
    limits(mountpointPod(sized, target({ cache: "emptyDir", cacheEmptyDirSizeLimit: "2Gi" }))),
    { work: { sizeLimit: "1Gi" }, cache: { sizeLimit: "2Gi" }, container: `${3 * 1024 + 128}Mi` },
  );
  assert.deepEqual(limits(mountpointPod(sized, target({}, ["cache x"]))).cache, {
    sizeLimit: "50Gi",
  });
  assert.deepEqual(
    limits(mountpointPod(sized, target({ cache: "emptyDir", cacheEmptyDirMedium: "Memory" }))),
    { work: { sizeLimit: "1Gi" }, cache: { medium: "Memory" }, container: `${1024 + 128}Mi` },
  );
});

Deno.test("mountpointPod(): bad cache attributes stop the pod with the reason", () => {
  assert.throws(
    () => mountpointPod(CONFIG, target({ cache: "hostPath" })),
    (e: unknown) =>
      e instanceof MountpointPodSpecError && /cache="hostPath" is not a cache type/.test(e.message),
  );
});

Deno.test("mountpointPod(): a custom CA is mounted and named to the mounter", () => {
  const pod = mountpointPod({ ...CONFIG, caConfigMap: "s3-ca" }, target({}));
  assert.equal(env(pod).MOUNTER_CA_BUNDLE, "/etc/ssl/custom-ca/ca-bundle.crt");
  assert.ok(pod.spec.volumes!.some((v) => v.name === "custom-ca" && v.configMap?.name === "s3-ca"));
});

Deno.test("hasCacheMountOption(): the spellings of the cache mount option", () => {
  for (const o of ["cache /x", "cache=/x", "--cache=/x", "--cache /x", " cache /x"]) {
    assert.ok(hasCacheMountOption([o]), o);
  }
  for (const o of ["cache-xz=b", "max-cache-size=5", "allow-delete"]) {
    assert.equal(hasCacheMountOption([o]), false, o);
  }
});

Deno.test("mountpointPod(): a metrics port with the volume's labels, or none", () => {
  const off = mountpointPod(CONFIG, target({}));
  assert.equal(off.spec.containers[0]!.ports, undefined);
  assert.equal(env(off).MOUNTER_METRICS_PORT, undefined);
  assert.equal(off.metadata.annotations?.["prometheus.io/scrape"], undefined);

  const pod = mountpointPod({ ...CONFIG, metricsPort: 9102 }, target({}));
  assert.deepEqual(pod.spec.containers[0]!.ports, [
    { name: "metrics", containerPort: 9102, protocol: "TCP" },
  ]);
  assert.equal(env(pod).MOUNTER_METRICS_PORT, "9102");
  assert.deepEqual(JSON.parse(env(pod).MOUNTER_METRICS_LABELS!), {
    "volume": "pv-1",
    "volume_id": "vol-1",
    "mountpoint_pod": "mp-1",
  });
  assert.equal(pod.metadata.annotations?.["prometheus.io/scrape"], "true");
  assert.equal(pod.metadata.annotations?.["prometheus.io/port"], "9102");
});

Deno.test("mountpointPod(): owned by its Node when the UID is known; tolerations of the workloads", () => {
  const pod = mountpointPod(CONFIG, {
    ...target({}),
    nodeUid: "uid-node-1",
    workloadTolerations: [[
      { key: "maintenance", operator: "Exists", effect: "NoExecute", tolerationSeconds: 30 },
    ]],
  });
  assert.deepEqual(pod.metadata.ownerReferences, [
    { apiVersion: "v1", kind: "Node", name: "node-1", uid: "uid-node-1", controller: true },
  ]);
  assert.deepEqual(pod.spec.tolerations, [
    { operator: "Exists", effect: "NoSchedule" },
    { operator: "Exists", effect: "PreferNoSchedule" },
    { key: "maintenance", operator: "Exists", effect: "NoExecute" },
  ]);
  assert.equal(mountpointPod(CONFIG, target({})).metadata.ownerReferences, undefined);
});

Deno.test("mountpointPod(): a priority class of the target replaces the configured one", () => {
  const config = { ...CONFIG, priorityClassName: "mount-s3-critical" };
  assert.equal(mountpointPod(config, target({})).spec.priorityClassName, "mount-s3-critical");
  assert.equal(
    mountpointPod(config, { ...target({}), priorityClassName: "mount-s3-preempting" }).spec
      .priorityClassName,
    "mount-s3-preempting",
  );
});
