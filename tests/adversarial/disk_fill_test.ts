/**
 * Disk fill by a hostile Mountpoint Pod (issue 23 item 7): the pod the controller renders runs on
 * the kubelet emulator as a real uid-1000 process that writes as much as it can — into its `work`
 * emptyDir, or to its stdout (the container's logs). The pod spec bounds both: the `work` emptyDir
 * has a size limit and the container an `ephemeral-storage` limit, so the kubelet's local-storage
 * eviction (emulated as kubelet v1.32 does it, `tests/testbed/kubelet/local_storage_eviction.ts`)
 * kills the writer and leaves the pod `Failed`/`Evicted` with the limit it broke. Without the
 * limits nothing stops the writer but the node's disk.
 *
 * On a real node the kubelet does the same (its eviction manager's `localStorageEviction`, every
 * 10 s of housekeeping); a write never fails with ENOSPC before that: a disk-backed emptyDir has no
 * quota of its own.
 */
import assert from "node:assert/strict";
import { EVENTS, NAMESPACES, PODS } from "../../src/kube/resources.ts";
import { mountpointPod, type MountpointPodConfig } from "../../src/mppod/pod_spec.ts";
import type { KubeObject } from "../../src/kube/client.ts";
import type { Pod } from "../testbed/kubelet/k8s_types.ts";
import { diskUsage } from "../testbed/kubelet/local_storage_eviction.ts";
import { emptyDirPath } from "../testbed/kubelet/kubelet_paths.ts";
import { exists, testOrSkip, waitFor } from "../_helpers.ts";
import { startHarness } from "../testbed/harness/kubelet_harness.ts";

const SKIP = Deno.uid() === 0 ? undefined : "needs root (pods run as uid 1000)";

/** The work dir's limit in this test (small, so the writer reaches it in a second). */
const WORK_LIMIT = "16Mi";

/** The Mountpoint Pod the controller renders, bound to the emulated node. */
function renderedPod(name: string): Pod {
  const config = {
    namespace: "mount-s3",
    image: "registry.example/s3-csi-mounter:test",
    imagePullPolicy: "IfNotPresent",
    command: "/bin/s3-csi-mounter",
    driverVersion: "0.0.0",
    mountpointVersion: "",
    priorityClassName: "",
    uid: 1000,
    terminationGraceSeconds: 30,
    extraLabels: {},
    cpuRequest: "",
    memoryRequest: "",
    memoryLimit: "",
    caConfigMap: "",
    workSizeLimit: WORK_LIMIT,
  } as MountpointPodConfig;
  const pod = mountpointPod(config, {
    name,
    attachmentName: `s3pa-${name}`,
    spec: {
      nodeName: "node-1",
      persistentVolumeName: "pv-1",
      volumeID: "vol-1",
      mountOptions: "",
      workloadFSGroup: "",
      authenticationSource: "driver",
    },
    volumeAttributes: { bucketName: "b" },
  });
  return { ...pod, spec: { ...pod.spec, nodeName: "node-1" } } as unknown as Pod;
}

/**
 * The "mounter" of the pods: as uid 1000, fill the work dir (`work` in its first argument) or its
 * stdout (`logs`), 1 MiB at a time, up to 1 GiB, then wait.
 */
const WRITER = [
  'id -u > "$MOUNTER_WORK_DIR/uid"',
  "i=0; while [ $i -lt 1024 ]; do i=$((i+1))",
  'if [ "$1" = work ]; then head -c 1048576 /dev/zero > "$MOUNTER_WORK_DIR/fill-$i" || echo "write $i failed" >&2',
  "else head -c 1048576 /dev/zero | tr '\\0' x; fi",
  "sleep 0.02; done",
  "exec sleep 600",
].join("\n");

testOrSkip(SKIP, {
  name:
    "disk fill: a Mountpoint Pod writing without end into its work dir or its logs is evicted at its limits",
  async fn() {
    await using h = await startHarness({
      mountpointImage: { argv: ["sh", "-c", WRITER, "writer"] },
      evictionMs: 500,
    });
    await h.client.create(NAMESPACES, { metadata: { name: "mount-s3" } });
    const cases = [
      {
        name: "mp-work",
        mode: "work",
        message: `Usage of EmptyDir volume "work" exceeds the limit "${WORK_LIMIT}". `,
      },
      {
        name: "mp-logs",
        mode: "logs",
        message: "Pod ephemeral local storage usage exceeds the total limit of containers 144Mi. ",
      },
    ];
    let bounds = "";
    for (const c of cases) {
      const pod = renderedPod(c.name);
      pod.spec.containers[0]!.args = [c.mode];
      const container = pod.spec.containers[0] as {
        resources?: { limits?: Record<string, string> };
      };
      bounds = `the pod spec's limits: work emptyDir ${
        pod.spec.volumes!.find((v) => v.name === "work")!.emptyDir?.sizeLimit ?? "none"
      }, container ephemeral-storage ${
        container.resources?.limits?.["ephemeral-storage"] ?? "none"
      }`;
      await h.client.create(PODS, pod);
    }
    for (const c of cases) {
      const running = await waitFor(`${c.name} running`, async () => {
        const p = await h.client.get<Pod>(PODS, c.name, "mount-s3");
        const id = p?.status?.containerStatuses?.[0]?.containerID;
        return id ? { podUID: p.metadata.uid, pid: Number(id.split("/").at(-1)) } : undefined;
      }, { timeoutMs: 30_000 });
      const pid = running.pid;
      const usage = async (uid: string) => {
        const logs = h.kubelet.containerLogPath(uid, "mountpoint")!.replace(/\/[^/]+$/, "");
        const mib = (b: number) => (b / 2 ** 20).toFixed(1);
        return `work dir ${mib(await diskUsage(emptyDirPath(h.root, uid, "work")))} MiB, logs ${
          mib(await diskUsage(logs))
        } MiB (${bounds})`;
      };
      const evicted = await waitFor(`${c.name} evicted`, async () => {
        const p = await h.client.get<Pod>(PODS, c.name, "mount-s3");
        return p?.status?.reason === "Evicted" ? p : undefined;
      }, { timeoutMs: 30_000 }).catch(async (err) => {
        throw new Error(`${err.message}; the writer went on: ${await usage(running.podUID)}`);
      });
      assert.equal(evicted.status?.phase, "Failed");
      assert.equal(evicted.status?.message, c.message);
      assert.equal(await exists(`/proc/${pid}`), false, "the writer is killed");
      const uid = evicted.metadata.uid;
      const dir = emptyDirPath(h.root, uid, "work");
      // deno-lint-ignore no-console
      console.log(
        `${c.name} (uid 1000, writing to its ${c.mode}): evicted, "${c.message.trim()}"; at the end ${await usage(
          uid,
        )}`,
      );
      if (c.mode === "work") {
        assert.equal((await Deno.readTextFile(`${dir}/uid`).catch(() => "")).trim(), "1000");
      }
    }
    const events = await h.client.list<{ reason: string; message: string } & KubeObject>(
      EVENTS,
      { namespace: "mount-s3" },
    );
    assert.ok(
      events.items.some((e) => e.reason === "Evicted" && /EmptyDir volume "work"/.test(e.message)),
      "an Evicted event names the volume",
    );
  },
});
