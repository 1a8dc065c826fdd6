/**
 * Containers as processes: a Mountpoint Pod runs as the pod's user with its comm emptyDir at the
 * kubelet host path; phases and restart counts follow the process exits; the real mounter from
 * this repo runs unprivileged and is restarted under `OnFailure`; deletion sends SIGTERM.
 */
import assert from "node:assert/strict";
import { PODS } from "../../src/kube/resources.ts";
import type { Pod } from "../testbed/kubelet/k8s_types.ts";
import { hostCommDir } from "../../src/mppod/paths.ts";
import { COMPONENT_MOUNTPOINT_POD, LABEL_COMPONENT } from "../../src/mppod/labels.ts";
import { exists, ROOT, tempDir, testOrSkip, waitFor } from "../_helpers.ts";
import { mounterMapping } from "../testbed/kubelet/mounter_image.ts";
import { startHarness } from "../testbed/harness/kubelet_harness.ts";

const ROOT_SKIP = Deno.uid() === 0 ? undefined : "needs root (mounts, pods under other uids)";

function mountpointPod(name: string, extra: Record<string, unknown> = {}): Pod {
  return {
    metadata: {
      name,
      namespace: "mount-s3",
      labels: { [LABEL_COMPONENT]: COMPONENT_MOUNTPOINT_POD },
    },
    spec: {
      nodeName: "node-1",
      restartPolicy: "OnFailure",
      terminationGracePeriodSeconds: 10,
      securityContext: { runAsUser: 1000, runAsGroup: 1000, fsGroup: 1000, runAsNonRoot: true },
      containers: [{
        name: "mountpoint",
        image: "registry.example/s3-csi-mounter:v2",
        securityContext: { allowPrivilegeEscalation: false },
        volumeMounts: [{ name: "comm", mountPath: "/comm" }],
      }],
      volumes: [{ name: "comm", emptyDir: { medium: "Memory", sizeLimit: "10Mi" } }],
      ...extra,
    },
  } as unknown as Pod;
}

async function podStatus(
  client: { get: <T>(...a: never[]) => Promise<T> },
  ns: string,
  name: string,
) {
  return (await (client.get as (r: unknown, n: string, ns: string) => Promise<Pod | undefined>)(
    PODS,
    name,
    ns,
  ))?.status;
}

testOrSkip(ROOT_SKIP, {
  name:
    "a Mountpoint Pod runs as the pod's user, unprivileged, with its comm dir at the kubelet path",
  async fn() {
    const script = [
      'cd "$MOUNTER_COMM_DIR"',
      'printf "%s|%s|%s|%s|%s\\n" "$(id -u)" "$(id -g)" "$(id -G)" "$MOUNTER_COMM_DIR" "$*" > whoami',
      "grep NoNewPrivs /proc/self/status >> whoami",
      "grep CapEff /proc/self/status >> whoami",
      "exec sleep 60",
    ].join("; ");
    await using h = await startHarness({
      mountpointImage: { argv: ["sh", "-c", script, "mounter"] },
    });
    await h.client.create(NAMESPACE, { metadata: { name: "mount-s3" } });
    const pod = await h.client.create<Pod>(PODS, {
      ...mountpointPod("mp-1"),
      spec: {
        ...mountpointPod("mp-1").spec,
        containers: [{
          ...mountpointPod("mp-1").spec.containers[0]!,
          args: ["--comm-dir", "/comm"],
        }],
      },
    });
    const uid = pod.metadata.uid;
    const comm = hostCommDir(h.root, uid);
    assert.equal(comm, `${h.root}/pods/${uid}/volumes/kubernetes.io~empty-dir/comm`);
    // The container writes its three lines one after the other: wait for all of them.
    const whoami = await waitFor(
      "whoami (all three lines)",
      async () => {
        const text = await Deno.readTextFile(`${comm}/whoami`).catch(() => "");
        return /CapEff:.*\n/.test(text) ? text : "";
      },
    );
    const [ids, nnp, caps] = whoami.trim().split("\n");
    // uid|gid|groups|comm dir|args ("/comm" rewritten to the host path)
    assert.equal(ids, `1000|1000|1000|${comm}|--comm-dir ${comm}`);
    assert.match(nnp!, /NoNewPrivs:\s+1/);
    assert.match(caps!, /CapEff:\s+0+$/);
    const info = await Deno.stat(comm);
    assert.equal(info.gid, 1000, "emptyDir group is the fsGroup");
    assert.equal(info.mode! & 0o7777, 0o2777);
    assert.equal((await Deno.stat(`${comm}/whoami`)).uid, 1000);

    const running = await waitFor("Running", async () => {
      const s = await podStatus(h.client as never, "mount-s3", "mp-1");
      return s?.phase === "Running" ? s : undefined;
    });
    const cs = running.containerStatuses![0]!;
    assert.ok(cs.state.running?.startedAt);
    assert.equal(cs.ready, true);
    const pid = Number(cs.containerID!.split("/").at(-1));
    const status = await Deno.readTextFile(`/proc/${pid}/status`);
    assert.match(status, /^Uid:\s+1000\s+1000\s+1000\s+1000$/m);
    assert.match(status, /^Groups:\s+1000\s*$/m);

    await h.client.delete(PODS, "mp-1", "mount-s3");
    await waitFor("pod gone", async () => !(await h.client.get(PODS, "mp-1", "mount-s3")), {
      timeoutMs: 15_000,
    });
    assert.equal(await exists(`/proc/${pid}`), false, "process killed by SIGTERM");
    await waitFor("pod dir removed", async () => !(await exists(comm)));
  },
});

testOrSkip(ROOT_SKIP, {
  name: "pod phase and restart counts follow the processes (OnFailure, Never, Always)",
  async fn() {
    await using h = await startHarness();
    const pod = (name: string, policy: string, command: string) => ({
      metadata: { name, namespace: "default" },
      spec: {
        nodeName: "node-1",
        restartPolicy: policy,
        containers: [{ name: "c", image: "busybox", command: ["sh", "-c", command] }],
      },
    });
    await h.client.create(PODS, pod("fails", "OnFailure", "exit 1"));
    await h.client.create(PODS, pod("ok", "OnFailure", "exit 0"));
    await h.client.create(PODS, pod("never", "Never", "exit 7"));
    await h.client.create(PODS, pod("always", "Always", "exit 0"));

    const restarted = await waitFor("two restarts", async () => {
      const s = await podStatus(h.client as never, "default", "fails");
      return (s?.containerStatuses?.[0]?.restartCount ?? 0) >= 2 ? s : undefined;
    }, { timeoutMs: 15_000 });
    assert.equal(restarted.phase, "Running");
    const last = restarted.containerStatuses![0]!;
    const lastExit = last.lastState.terminated ?? last.state.terminated;
    assert.equal(lastExit?.exitCode, 1);
    assert.equal(lastExit?.reason, "Error");

    const ok = await waitFor("Succeeded", async () => {
      const s = await podStatus(h.client as never, "default", "ok");
      return s?.phase === "Succeeded" ? s : undefined;
    });
    assert.equal(ok.containerStatuses![0]!.restartCount, 0);
    assert.equal(ok.containerStatuses![0]!.state.terminated?.reason, "Completed");

    const never = await waitFor("Failed", async () => {
      const s = await podStatus(h.client as never, "default", "never");
      return s?.phase === "Failed" ? s : undefined;
    });
    assert.equal(never.containerStatuses![0]!.state.terminated?.exitCode, 7);

    const always = await waitFor("Always restarts exit 0", async () => {
      const s = await podStatus(h.client as never, "default", "always");
      return (s?.containerStatuses?.[0]?.restartCount ?? 0) >= 1 ? s : undefined;
    }, { timeoutMs: 15_000 });
    assert.equal(always.phase, "Running");
  },
});

for (const bundle of [false, true]) {
  testOrSkip(ROOT_SKIP, {
    name: `the real mounter runs unprivileged (${
      bundle ? "bundle" : "from source"
    }) and is restarted under OnFailure`,
    async fn() {
      await using h = await startHarness(
        bundle ? { bundleMounter: true } : {},
      );
      const { exitCode, log } = await unansweredMounter(h, "mp-real");
      assert.equal(exitCode, 3, "MOUNTER_EXIT_NO_MESSAGE");
      assert.match(log, /s3csi.mounter|fd passing|mount message/i, log);
      assert.doesNotMatch(
        log,
        /comm dir .* does not exist/,
        "MOUNTER_COMM_DIR points at the emptyDir",
      );
    },
  });
}

// The from-source mounter runs as the pod's user against the checkout's node_modules, which root
// owns. Deno's default (`nodeModulesDir: auto`) re-links node_modules whenever its setup cache
// does not cover what it resolves (a missing `.bin/`, a missing or stale `.setup-cache.bin`, a
// root process re-linking at that moment): as uid 1000 that write fails with EACCES and the
// mounter exits 1 within a fraction of a second, before any of its code runs. A checkout whose
// node_modules lacks both (a copy with hard-linked packages) shows it every time.
testOrSkip(ROOT_SKIP, {
  name:
    "the from-source mounter never installs into the checkout's node_modules (a half set-up one still works)",
  async fn() {
    await using copy = await tempDir("s3csi-checkout-");
    await Deno.chmod(copy.path, 0o755);
    await copyCheckout(copy.path);
    await Deno.remove(`${copy.path}/node_modules/.bin`, { recursive: true });
    await Deno.remove(`${copy.path}/node_modules/.deno/.setup-cache.bin`);
    await Deno.mkdir(`${copy.path}/deno-dir`, { mode: 0o1777 });
    await Deno.chmod(`${copy.path}/deno-dir`, 0o1777);
    await using h = await startHarness({
      mountpointImage: mounterMapping(`${copy.path}/src/cmd/mounter/main.ts`, copy.path),
    });
    const { exitCode, log } = await unansweredMounter(h, "mp-half");
    assert.equal(exitCode, 3, log);
    assert.ok(!(await exists(`${copy.path}/node_modules/.bin`)), "nothing was installed");
  },
});

/**
 * Mountpoint Pod `name` (namespace mount-s3, created here) whose real mounter gets no mount
 * message: it gives up after 1 s and its container is restarted (OnFailure). The first run's exit
 * code and log.
 */
async function unansweredMounter(
  h: Awaited<ReturnType<typeof startHarness>>,
  name: string,
): Promise<{ exitCode: number | undefined; log: string }> {
  await h.client.create(NAMESPACE, { metadata: { name: "mount-s3" } });
  const base = mountpointPod(name);
  const pod = await h.client.create<Pod>(PODS, {
    ...base,
    spec: {
      ...base.spec,
      containers: [{
        ...base.spec.containers[0]!,
        args: ["--receive-timeout", "1s", "--log-format", "text"],
      }],
    },
  });
  const s = await waitFor("a restart", async () => {
    const st = await podStatus(h.client as never, "mount-s3", name);
    return (st?.containerStatuses?.[0]?.restartCount ?? 0) >= 1 ? st : undefined;
  }, { timeoutMs: 40_000 });
  const cs = s.containerStatuses![0]!;
  const log = await Deno.readTextFile(
    `${h.root}/pod-logs/mount-s3_${name}_${pod.metadata.uid}/mountpoint/0.log`,
  );
  return { exitCode: (cs.lastState.terminated ?? cs.state.terminated)?.exitCode, log };
}

/**
 * A checkout at `dir` as the mounter needs it: deno.json, deno.lock, src/ (without the engine's
 * Rust tree) and node_modules with every file hard-linked (cheap, and removing a name there
 * leaves this checkout's intact).
 */
async function copyCheckout(dir: string): Promise<void> {
  const cp = async (...args: string[]) => {
    const r = await new Deno.Command("cp", { args, stdin: "null", stderr: "piped" }).output();
    if (!r.success) throw new Error(`cp ${args.join(" ")}: ${new TextDecoder().decode(r.stderr)}`);
  };
  await cp(`${ROOT}deno.json`, `${ROOT}deno.lock`, dir);
  await Deno.mkdir(`${dir}/src`);
  for await (const e of Deno.readDir(`${ROOT}src`)) {
    if (e.isDirectory && e.name !== "engine") await cp("-r", `${ROOT}src/${e.name}`, `${dir}/src/`);
  }
  await cp("-al", `${ROOT}node_modules`, `${dir}/node_modules`);
}

const NAMESPACE = {
  group: "",
  version: "v1",
  plural: "namespaces",
  kind: "Namespace",
  namespaced: false,
};

testOrSkip(ROOT_SKIP, {
  name:
    "init containers run one after the other before the containers; a failed one under Never fails the pod",
  async fn() {
    await using h = await startHarness();
    const pod = (name: string, policy: string, init: string) => ({
      metadata: { name, namespace: "default" },
      spec: {
        nodeName: "node-1",
        restartPolicy: policy,
        initContainers: [
          {
            name: "init-1",
            command: ["sh", "-c", init],
            volumeMounts: [{ name: "w", mountPath: "/w" }],
          },
          {
            name: "init-2",
            command: ["sh", "-c", "echo two >> /w/log"],
            volumeMounts: [{ name: "w", mountPath: "/w" }],
          },
        ],
        containers: [{
          name: "main",
          command: ["cat", "/w/log"],
          volumeMounts: [{ name: "w", mountPath: "/w" }],
        }],
        volumes: [{ name: "w", emptyDir: {} }],
      },
    });
    const ok = await h.client.create<Pod>(
      PODS,
      pod("init-ok", "Never", "echo one > /w/log") as unknown as Pod,
    );
    await h.client.create(PODS, pod("init-fails", "Never", "exit 3"));
    await h.client.create(PODS, pod("init-retries", "OnFailure", "exit 3"));

    const done = await waitFor("init-ok Succeeded", async () => {
      const s = await podStatus(h.client as never, "default", "init-ok");
      return s?.phase === "Succeeded" ? s : undefined;
    });
    assert.deepEqual(done.initContainerStatuses?.map((c) => c.state.terminated?.exitCode), [0, 0]);
    assert.equal(done.conditions?.find((c) => c.type === "Initialized")?.status, "True");
    const log = await Deno.readTextFile(h.kubelet.containerLogPath(ok.metadata.uid, "main")!);
    assert.equal(log, "one\ntwo\n");

    const failed = await waitFor("init-fails Failed", async () => {
      const s = await podStatus(h.client as never, "default", "init-fails");
      return s?.phase === "Failed" ? s : undefined;
    });
    assert.equal(failed.initContainerStatuses?.[0]?.state.terminated?.exitCode, 3);
    assert.equal(failed.containerStatuses?.[0]?.state.waiting?.reason, "PodInitializing");

    const retried = await waitFor("init-retries restarts", async () => {
      const s = await podStatus(h.client as never, "default", "init-retries");
      return (s?.initContainerStatuses?.[0]?.restartCount ?? 0) >= 1 ? s : undefined;
    }, { timeoutMs: 10_000 });
    assert.equal(retried.phase, "Pending");
    assert.equal(retried.conditions?.find((c) => c.type === "Initialized")?.status, "False");
  },
});
