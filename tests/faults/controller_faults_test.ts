/**
 * Controller-level fault injection:
 * - the API server restarts (emulator: every watch dropped and its history expired, so resumes get
 *   410; real tier: the kube-apiserver process is killed and started again on the same etcd) while
 *   workloads are deleted → the controller resumes and misses no detach;
 * - 500 workload pods created and deleted in waves → exactly one Mountpoint Pod and one attachment
 *   per (volume, node) in each wave (100 created in all, counted from the watch), then zero left.
 */
import assert from "node:assert/strict";
import type { MountpointS3PodAttachment } from "../../src/api/mountpoint_s3_pod_attachment.ts";
import { NAMESPACES, PODS, PRIORITY_CLASSES, PVCS, PVS } from "../../src/kube/resources.ts";
import { S3PAS } from "../../src/api/mountpoint_s3_pod_attachment.ts";
import type { Pod } from "../../src/kube/types.ts";
import { ANNOTATION_NEEDS_UNMOUNT } from "../../src/mppod/labels.ts";
import { startApiServer } from "../testbed/apiserver/api_server.ts";
import { kubeConfigFromFile } from "../../src/kube/kube_config.ts";
import { RestKubeClient } from "../../src/kube/rest_client.ts";
import { ROOT, type Running, spawnBinary, waitFor } from "../_helpers.ts";
import {
  clusterKinds,
  clusterTest,
  ensureCrd,
  type TestCluster,
  testCluster,
} from "../testbed/harness/controller_cluster.ts";
import { preboundClaim, preboundPv } from "../testbed/control_plane/prebound_volume.ts";

const KUBE_REAL_STATE = Deno.env.get("KUBE_REAL_STATE") ?? "/var/tmp/s3csi-kube-real";

async function volume(c: TestCluster, name: string): Promise<void> {
  const pv = `pv-${c.namespace}-${name}`;
  const claim = `claim-${name}`;
  await c.client.create(PVS, preboundPv(pv, { name: claim, namespace: c.namespace }));
  await c.client.create(PVCS, preboundClaim(claim, c.namespace, pv));
  await c.client.patch(PVCS, claim, c.namespace, { status: { phase: "Bound" } }, {
    subresource: "status",
  });
}

function workload(c: TestCluster, name: string, claim: string, node: string): Pod {
  return {
    metadata: { name, namespace: c.namespace },
    spec: {
      nodeName: node,
      containers: [{ name: "app", image: "busybox" }],
      volumes: [{ name: "data", persistentVolumeClaim: { claimName: `claim-${claim}` } }],
    },
  };
}

function controller(kubeconfig: string, mpNamespace: string): Running {
  return spawnBinary("controller", [
    "--mountpoint-namespace",
    mpNamespace,
    "--leader-elect=false",
    "--metrics-address",
    "127.0.0.1:0",
  ], { KUBECONFIG: kubeconfig });
}

async function stop(p: Running, name: string): Promise<void> {
  const code = await p.stop("SIGTERM", 20_000);
  await Deno.mkdir(`${ROOT}dist/test-logs`, { recursive: true });
  await Deno.writeTextFile(`${ROOT}dist/test-logs/faults-${name}-${Date.now()}.log`, p.stderr());
  assert.equal(code, 0, `controller exit code; log tail:\n${p.stderr().slice(-2000)}`);
}

async function attachmentsOf(c: TestCluster): Promise<MountpointS3PodAttachment[]> {
  return (await c.client.list<MountpointS3PodAttachment>(S3PAS)).items.filter((a) =>
    a.spec.persistentVolumeName.startsWith(`pv-${c.namespace}-`)
  );
}

/** `check` with API errors (a restarting server) read as "not yet". */
async function settled(check: () => Promise<boolean>): Promise<boolean> {
  try {
    return await check();
  } catch {
    return false;
  }
}

const workloadCount = (as: MountpointS3PodAttachment[]) =>
  as.reduce((n, a) => n + Object.values(a.spec.mountpointS3PodAttachments).flat().length, 0);

/** Kill the real kube-apiserver and start it again with the same arguments (etcd keeps the data). */
async function restartRealApiserver(client: RestKubeClient): Promise<void> {
  const pidFile = `${KUBE_REAL_STATE}/kube-apiserver.pid`;
  const pid = Number((await Deno.readTextFile(pidFile)).trim());
  const cmdline = (await Deno.readTextFile(`/proc/${pid}/cmdline`)).split("\0").filter(Boolean);
  // SIGKILL: a crash. (SIGTERM starts a graceful shutdown that can last minutes while watches drain.)
  Deno.kill(pid, "SIGKILL");
  await waitFor(
    "kube-apiserver to exit",
    async () => !(await Deno.stat(`/proc/${pid}`).catch(() => undefined)),
    {
      timeoutMs: 30_000,
      intervalMs: 100,
    },
  );
  // Same arguments, detached like start.sh does; its output is not needed by the test.
  const child = new Deno.Command("setsid", {
    args: cmdline,
    stdin: "null",
    stdout: "null",
    stderr: "null",
  }).spawn();
  await Deno.writeTextFile(pidFile, `${child.pid}\n`);
  child.unref();
  await waitFor("kube-apiserver to serve again", async () => {
    try {
      await client.list(PODS, { namespace: "default", limit: 1 });
      return true;
    } catch {
      return false;
    }
  }, { timeoutMs: 90_000, intervalMs: 250 });
}

for (const kind of clusterKinds()) {
  clusterTest(
    kind,
    `faults (${kind}): API server restart while workloads are deleted → no missed detach`,
    async () => {
      if (kind === "emulator") {
        // The emulator keeps its state in process: drop every watch and expire the history, which
        // is what clients see across a restart (connection reset, then 410 on resume).
        const api = await startApiServer({ podTerminationMs: 0 });
        try {
          const client = new RestKubeClient(kubeConfigFromFile(api.kubeconfigPath));
          await ensureCrd(client);
          const c = await testClusterOn(client, api.kubeconfigPath);
          await scenario(c, () => {
            api.closeAllWatches();
            api.expireHistory();
            return Promise.resolve();
          });
        } finally {
          await api.stop();
        }
        return;
      }
      await using c = await testCluster(kind);
      await scenario(c, () => restartRealApiserver(c.client));
    },
  );
}

/** A TestCluster view on an already running emulator (so the test can reach its hooks). */
async function testClusterOn(client: RestKubeClient, kubeconfig: string): Promise<TestCluster> {
  const suffix = crypto.randomUUID().slice(0, 8);
  const namespace = `w-${suffix}`;
  const mpNamespace = `mp-${suffix}`;
  for (const ns of [namespace, mpNamespace]) {
    await client.create(NAMESPACES, { metadata: { name: ns } });
  }
  await client.create(PRIORITY_CLASSES, {
    metadata: { name: "mount-s3-critical" },
    value: 1_000_000_000,
  } as never).catch(() => {});
  return {
    name: "emulator",
    kubeconfig,
    client,
    namespace,
    mpNamespace,
    [Symbol.asyncDispose]: () => Promise.resolve(),
  };
}

async function scenario(c: TestCluster, restart: () => Promise<void>): Promise<void> {
  await volume(c, "r");
  for (const n of ["a", "b", "c"]) await c.client.create(PODS, workload(c, n, "r", "node-1"));
  const proc = controller(c.kubeconfig, c.mpNamespace);
  try {
    // -1 while the API server answers errors (restarting).
    const count = () => attachmentsOf(c).then(workloadCount, () => -1);
    await waitFor("three workloads attached", async () => (await count()) === 3, {
      timeoutMs: 30_000,
    });
    await restart();
    for (const n of ["a", "b"]) {
      await waitFor(
        `delete ${n}`,
        () => settled(() => c.client.delete(PODS, n, c.namespace, { gracePeriodSeconds: 0 })),
        {
          timeoutMs: 30_000,
          intervalMs: 200,
        },
      );
    }
    await waitFor("the two deleted workloads detached", async () => (await count()) === 1, {
      timeoutMs: 90_000,
      intervalMs: 200,
    });
    await waitFor(
      "delete c",
      () => settled(() => c.client.delete(PODS, "c", c.namespace, { gracePeriodSeconds: 0 })),
    );
    await waitFor(
      "the attachment deleted and its Mountpoint Pod marked needs-unmount",
      () =>
        settled(async () => {
          if ((await attachmentsOf(c)).length) return false;
          const mps = (await c.client.list<Pod>(PODS, { namespace: c.mpNamespace })).items;
          return mps.length === 1 &&
            mps[0]!.metadata.annotations?.[ANNOTATION_NEEDS_UNMOUNT] === "true";
        }),
      { timeoutMs: 60_000, intervalMs: 200 },
    );
  } finally {
    await stop(proc, "restart");
  }
}

/**
 * Every Mountpoint Pod created in `namespace` from now on (UIDs of ADDED watch events), for
 * counting creations — duplicates included, even ones deleted again at once.
 */
async function watchCreations(c: TestCluster, signal: AbortSignal) {
  const created = new Set<string>();
  let rv = (await c.client.list(PODS, { namespace: c.mpNamespace })).resourceVersion;
  const running = (async () => {
    while (!signal.aborted) {
      await c.client.watch<Pod>(
        PODS,
        { namespace: c.mpNamespace, resourceVersion: rv, signal },
        (e) => {
          rv = e.object.metadata?.resourceVersion ?? rv;
          if (e.type === "ADDED" && e.object.metadata.uid) created.add(e.object.metadata.uid);
        },
      ).catch((err) => {
        if (!signal.aborted) throw err;
      });
    }
  })();
  return {
    created,
    running,
    /** Resolves once the watch has seen everything up to now (emulator resourceVersions). */
    async caughtUp(): Promise<void> {
      const now = Number((await c.client.list(PODS, { namespace: c.mpNamespace })).resourceVersion);
      await waitFor("the Mountpoint Pod watch to catch up", () => Number(rv) >= now, {
        timeoutMs: 30_000,
      });
    },
  };
}

Deno.test("faults (emulator): 500 workloads created and deleted in waves leave nothing behind", async () => {
  await using c = await testCluster("emulator");
  const VOLUMES = 20;
  const NODES = 5;
  for (let v = 0; v < VOLUMES; v++) await volume(c, `v${v}`);
  // Workload i uses volume i % 20 on node i % 5: 20 (volume, node) pairs, so each wave of 100
  // needs exactly 20 Mountpoint Pods (5 workloads share each) and 20 attachments.
  const PER_WAVE = VOLUMES;
  const stopWatch = new AbortController();
  const mpWatch = await watchCreations(c, stopWatch.signal);
  const proc = controller(c.kubeconfig, c.mpNamespace);
  const started = performance.now();
  try {
    for (let wave = 0; wave < 5; wave++) {
      const names = Array.from({ length: 100 }, (_, i) => `w${wave}-${i}`);
      await Promise.all(
        names.map((n, i) =>
          c.client.create(PODS, workload(c, n, `v${i % VOLUMES}`, `node-${i % NODES}`))
        ),
      );
      await waitFor(
        `wave ${wave}: 100 attached`,
        async () => workloadCount(await attachmentsOf(c)) === 100,
        {
          timeoutMs: 60_000,
          intervalMs: 200,
        },
      );
      const attachments = await attachmentsOf(c);
      assert.equal(
        attachments.length,
        PER_WAVE,
        `wave ${wave}: one attachment per volume and node`,
      );
      for (const a of attachments) {
        const mps = Object.entries(a.spec.mountpointS3PodAttachments);
        assert.equal(mps.length, 1, `${a.metadata.name}: one Mountpoint Pod`);
        assert.equal(mps[0]![1].length, 100 / PER_WAVE, `${a.metadata.name}: 5 workloads share it`);
      }
      const running = (await c.client.list<Pod>(PODS, { namespace: c.mpNamespace })).items;
      assert.equal(running.length, PER_WAVE, `wave ${wave}: Mountpoint Pods`);
      await Promise.all(
        names.map((n) => c.client.delete(PODS, n, c.namespace, { gracePeriodSeconds: 0 })),
      );
      await waitFor(
        `wave ${wave}: all detached`,
        async () => (await attachmentsOf(c)).length === 0,
        {
          timeoutMs: 60_000,
          intervalMs: 200,
        },
      );
      // Every Mountpoint Pod is asked to unmount; the "node" then ends it (Succeeded) as the
      // mounter would, and the controller deletes it.
      const mps = (await c.client.list<Pod>(PODS, { namespace: c.mpNamespace })).items;
      assert.deepEqual(
        mps.map((p) => p.metadata.uid).sort(),
        running.map((p) => p.metadata.uid).sort(),
        `wave ${wave}: the same ${PER_WAVE} Mountpoint Pods, none created or lost meanwhile`,
      );
      const unmarked = mps.filter((p) =>
        p.metadata.annotations?.[ANNOTATION_NEEDS_UNMOUNT] !== "true"
      );
      assert.deepEqual(unmarked.map((p) => p.metadata.name), [], "every Mountpoint Pod marked");
      await Promise.all(
        mps.map((p) =>
          c.client.patch(
            PODS,
            p.metadata.name!,
            c.mpNamespace,
            { status: { phase: "Succeeded" } },
            { subresource: "status" },
          )
        ),
      );
      await waitFor(
        `wave ${wave}: Mountpoint Pods deleted`,
        async () => (await c.client.list(PODS, { namespace: c.mpNamespace })).items.length === 0,
        { timeoutMs: 60_000, intervalMs: 200 },
      );
    }
    assert.equal((await attachmentsOf(c)).length, 0);
    assert.equal((await c.client.list(PODS, { namespace: c.namespace })).items.length, 0);
    await mpWatch.caughtUp();
    assert.equal(mpWatch.created.size, 5 * PER_WAVE, "Mountpoint Pods created over the 5 waves");
  } finally {
    stopWatch.abort();
    await mpWatch.running.catch(() => {});
    await stop(proc, "waves");
  }
  const seconds = (performance.now() - started) / 1000;
  // deno-lint-ignore no-console
  console.error(
    `500 workloads in 5 waves: ${
      seconds.toFixed(1)
    } s, ${mpWatch.created.size} Mountpoint Pods created, nothing left`,
  );
});
