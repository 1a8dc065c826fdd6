/**
 * The engine's local cache on a real node, both kinds the volume attributes offer:
 *
 * - `cache: emptyDir` with `cacheEmptyDirSizeLimit`: the kubelet creates the Mountpoint Pod's
 *   cache emptyDir with that limit; the uid-1000 engine gets `--cache=/cache` and 95 % of the limit
 *   as `--max-cache-size`, fills the volume with blocks on reads and stays within the limit (the
 *   kubelet would evict the pod otherwise);
 * - `cache: ephemeral`: the Mountpoint Pod's generic ephemeral volume becomes a PVC that the real
 *   scheduler and PV controller bind (here to a local PersistentVolume of a
 *   `WaitForFirstConsumer` StorageClass), the kubelet hands it to the engine writable by the pod's
 *   fsGroup, and the claim goes with the Mountpoint Pod.
 *
 * In both, the workload reads byte-identical data and nothing of the cache lands in the comm dir.
 *
 * @module
 */
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import type { KubeObject } from "../../src/kube/client.ts";
import { NODES, PODS, PVCS, PVS, STORAGE_CLASSES } from "../../src/kube/resources.ts";
import {
  CACHE_DIR,
  CACHE_VOLUME_NAME,
  EPHEMERAL_CACHE_LABEL,
  EPHEMERAL_CACHE_LABEL_VALUE,
} from "../../src/mppod/cache_volume.ts";
import { COMM_VOLUME_NAME } from "../../src/mppod/paths.ts";
import { DEFAULT_MOUNTPOINT_NAMESPACE } from "../../src/mppod/labels.ts";
import type { Pod } from "../testbed/kubelet/k8s_types.ts";
import { testBytes } from "../testbed/harness/engine.ts";
import { dirUsage, listTree, waitFor } from "../_helpers.ts";
import { type Step, unique } from "../scenarios/cluster.ts";
import { type RealNodeCluster, report, type Tier } from "./_harness.ts";
import { mountpointProcesses } from "./_node_only.ts";

const MIB = 1024 * 1024;
/** Objects read through the cache: more than any cache limit below, so eviction must work. */
const OBJECTS = [0, 1, 2].map((i) => ({ key: `c-${i}.bin`, bytes: testBytes(24 * MIB, 40 + i) }));
const HOSTNAME_LABEL = "kubernetes.io/hostname";

interface PvcLike extends KubeObject {
  spec?: { volumeName?: string; storageClassName?: string };
  status?: { phase?: string };
}

/** Read every object twice (md5 each time), then report and idle so the cache can be inspected. */
function readTwice(): string {
  const files = OBJECTS.map((o) => `/data/${o.key}`).join(" ");
  return `set -e; md5sum ${files}; md5sum ${files}; echo READY; exec sleep 300`;
}

function assertReadsIdentical(log: string): void {
  for (const o of OBJECTS) {
    const md5 = createHash("md5").update(o.bytes).digest("hex");
    const seen = log.split("\n").filter((l) => l.endsWith(`/data/${o.key}`));
    assert.deepEqual(
      seen.map((l) => l.split(/\s+/)[0]),
      [md5, md5],
      `${o.key} read twice byte-identical: ${log}`,
    );
  }
}

/** The engine's command line in a Mountpoint Pod, read from the host's `/proc`. */
async function engineArgs(e: RealNodeCluster, mp: Pod): Promise<string> {
  const { tree, engine } = await mountpointProcesses(e, mp);
  assert.ok(engine, `the engine runs: ${tree.map((p) => p.cmdline)}`);
  return engine.cmdline;
}

/**
 * Run a reader of a volume with `attributes`, then hand the running Mountpoint Pod and the
 * reader's log to `check`; everything is deleted afterwards, and the Mountpoint Pod must go.
 */
async function withCachedReader(
  e: RealNodeCluster,
  o: { attributes: Record<string, string>; mountOptions?: string[] },
  check: (mp: Pod, log: string) => Promise<void>,
): Promise<void> {
  const bucket = await e.bucket("cache");
  const vol = `cache-${unique()}`;
  let podName: string | undefined;
  try {
    for (const x of OBJECTS) await e.put(bucket, x.key, x.bytes);
    await e.staticVolume(vol, {
      bucket,
      attributes: o.attributes,
      ...(o.mountOptions ? { mountOptions: o.mountOptions } : {}),
    });
    const pod = await e.pod({
      name: `cache-${unique()}`,
      volumes: [{ claim: vol, mountPath: "/data", readOnly: true }],
      script: readTwice(),
    });
    podName = pod.metadata.name;
    await e.waitLog(pod, "READY", 120_000).catch(async (err) => {
      throw new Error(`${err}: ${await e.diagnose(pod)}`);
    });
    const mpName = await e.mountpointPodOf(pod);
    assert.ok(mpName, "the workload has a Mountpoint Pod");
    const mp = await e.client.get<Pod>(PODS, mpName, DEFAULT_MOUNTPOINT_NAMESPACE);
    assert.equal(mp?.status?.phase, "Running", `Mountpoint Pod ${mpName} runs (not evicted)`);
    await check(mp!, await e.log(pod));
  } finally {
    if (podName) await e.deletePod(podName).catch(() => {});
    await e.waitReleased().catch(() => {});
    await e.dropVolume(vol);
    await e.dropBucket(bucket);
  }
}

/** The cache scenarios (see the module doc). */
export async function engineCache(tier: Tier, step: Step): Promise<void> {
  const e = tier.cluster;
  const root = e.kubeletRoot(tier.node.nodeName);

  await step(
    "emptyDir cache: blocks in the pod's cache volume, within its size limit",
    async () => {
      const limit = 32 * MIB;
      await withCachedReader(e, {
        attributes: { cache: "emptyDir", cacheEmptyDirSizeLimit: "32Mi" },
      }, async (mp, log) => {
        assertReadsIdentical(log);
        const vol = mp.spec?.volumes?.find((v) => v.name === CACHE_VOLUME_NAME);
        assert.deepEqual(vol?.emptyDir, { sizeLimit: "32Mi" }, "the cache emptyDir has the limit");
        const args = await engineArgs(e, mp);
        assert.match(args, new RegExp(`--cache[= ]${CACHE_DIR}( |$)`), args);
        assert.match(args, /--max-cache-size[= ]30( |$)/, `95 % of 32 MiB: ${args}`);
        const volumes = `${root}/pods/${mp.metadata.uid}/volumes/kubernetes.io~empty-dir`;
        const used = await dirUsage(`${volumes}/${CACHE_VOLUME_NAME}`);
        assert.ok(used.files > 0, "the engine cached blocks in the cache volume");
        assert.ok(used.bytes <= limit, `cache volume holds ${used.bytes} bytes, over ${limit}`);
        const comm = await listTree(`${volumes}/${COMM_VOLUME_NAME}`);
        assert.ok(!comm.some((n) => /cache/.test(n)), `comm dir: ${comm.join(" ")}`);
        report(`emptyDir cache: ${used.files} files, ${(used.bytes / MIB).toFixed(1)} MiB of 32`);
      });
    },
  );

  await step(
    "ephemeral cache: a claim bound by the scheduler and PV controller, gone with the pod",
    async () => {
      const node = await e.client.get<KubeObject>(NODES, tier.node.nodeName);
      const hostname = node?.metadata?.labels?.[HOSTNAME_LABEL];
      assert.ok(hostname, `node ${tier.node.nodeName} has ${HOSTNAME_LABEL}`);
      const name = `s3csi-cache-${unique()}`;
      const hostDir = await Deno.makeTempDir({ dir: "/var/tmp", prefix: `${name}-` });
      await e.client.create(STORAGE_CLASSES, {
        apiVersion: "storage.k8s.io/v1",
        kind: "StorageClass",
        metadata: { name },
        provisioner: "kubernetes.io/no-provisioner",
        volumeBindingMode: "WaitForFirstConsumer",
      } as KubeObject);
      await e.client.create(PVS, {
        metadata: { name },
        spec: {
          capacity: { storage: "128Mi" },
          accessModes: ["ReadWriteOnce"],
          persistentVolumeReclaimPolicy: "Retain",
          storageClassName: name,
          volumeMode: "Filesystem",
          local: { path: hostDir },
          nodeAffinity: {
            required: {
              nodeSelectorTerms: [{
                matchExpressions: [{ key: HOSTNAME_LABEL, operator: "In", values: [hostname] }],
              }],
            },
          },
        },
      } as KubeObject);
      let claim: string | undefined;
      try {
        await withCachedReader(e, {
          attributes: {
            cache: "ephemeral",
            cacheEphemeralStorageClassName: name,
            cacheEphemeralStorageResourceRequest: "64Mi",
          },
          mountOptions: ["max-cache-size=32"],
        }, async (mp, log) => {
          assertReadsIdentical(log);
          claim = `${mp.metadata.name}-${CACHE_VOLUME_NAME}`;
          const pvc = await e.client.get<PvcLike>(PVCS, claim, DEFAULT_MOUNTPOINT_NAMESPACE);
          assert.equal(pvc?.status?.phase, "Bound", `claim ${claim} bound`);
          assert.equal(pvc?.spec?.volumeName, name, "to the local PersistentVolume");
          assert.equal(pvc?.metadata?.labels?.[EPHEMERAL_CACHE_LABEL], EPHEMERAL_CACHE_LABEL_VALUE);
          assert.deepEqual(
            pvc?.metadata?.ownerReferences?.map((r) => {
              const ref = r as { kind?: string; name?: string };
              return `${ref.kind}/${ref.name}`;
            }),
            [`Pod/${mp.metadata.name}`],
            "the claim belongs to the Mountpoint Pod",
          );
          const args = await engineArgs(e, mp);
          assert.match(args, new RegExp(`--cache[= ]${CACHE_DIR}( |$)`), args);
          assert.match(args, /--max-cache-size[= ]32( |$)/, args);
          const used = await dirUsage(hostDir);
          assert.ok(used.files > 0, "the engine cached blocks on the claimed volume");
          // Mountpoint evicts once over its limit, so it may overshoot it by 1-2 % (measured
          // here: 32 MiB + 2.8 KiB); an emptyDir limit gets 95 % of itself for that reason.
          assert.ok(
            used.bytes <= 32 * MIB * 1.02,
            `cache holds ${used.bytes} bytes, over max-cache-size 32 MiB + 2 %`,
          );
          const info = await Deno.stat(hostDir);
          assert.equal(info.gid, 1000, "the kubelet gave the volume to the pod's fsGroup");
          report(
            `ephemeral cache: claim ${claim} → PV ${name}; ${used.files} files, ${
              (used.bytes / MIB).toFixed(1)
            } MiB`,
          );
        });
        // Gone with the Mountpoint Pod (withCachedReader waited for it): the garbage collector
        // deletes the claim, the PV controller releases the PV.
        assert.ok(claim, "the claim was seen");
        await waitFor(
          `claim ${claim} deleted with its Mountpoint Pod`,
          async () => !(await e.client.get(PVCS, claim!, DEFAULT_MOUNTPOINT_NAMESPACE)),
          { timeoutMs: 60_000, intervalMs: 250 },
        );
        await waitFor(
          `PV ${name} released`,
          async () => (await e.client.get<PvcLike>(PVS, name))?.status?.phase === "Released",
          { timeoutMs: 60_000, intervalMs: 250 },
        );
      } finally {
        if (claim) await e.client.delete(PVCS, claim, DEFAULT_MOUNTPOINT_NAMESPACE).catch(() => 0);
        await e.client.delete(PVS, name).catch(() => false);
        await e.client.delete(STORAGE_CLASSES, name).catch(() => false);
        await Deno.remove(hostDir, { recursive: true }).catch(() => {});
      }
    },
  );
}
