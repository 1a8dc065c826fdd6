import assert from "node:assert/strict";
import {
  buildProcessSpec,
  ContainerConfigError,
  expandVars,
  resolveEnv,
  rewritePaths,
} from "./container_spec.ts";
import type { Pod } from "./k8s_types.ts";

Deno.test("mount paths are rewritten only as whole path prefixes", () => {
  const m = new Map([["/data", "/host/t/mount"], ["/data/sub", "/host/s"]]);
  assert.equal(rewritePaths("cat /data/f > '/data/sub/x'", m), "cat /host/t/mount/f > '/host/s/x'");
  assert.equal(rewritePaths("x=/data;/database /x/data", m), "x=/host/t/mount;/database /x/data");
  assert.equal(expandVars("$(A)-$$(A)-$(B)", { A: "1" }), "1-$(A)-$(B)");
});

const pod = {
  metadata: { name: "p", namespace: "ns", uid: "u", labels: {} },
  spec: {
    nodeName: "n1",
    securityContext: { runAsUser: 10, fsGroup: 20, supplementalGroups: [30, 20] },
    containers: [{
      name: "c",
      command: ["sh", "-c"],
      args: ["echo $(POD) > /data/x"],
      env: [{ name: "POD", valueFrom: { fieldRef: { fieldPath: "metadata.name" } } }],
      volumeMounts: [{ name: "v", mountPath: "/data" }],
    }],
  },
} as unknown as Pod;

Deno.test("a workload runs its command via setsid + setpriv with the pod's identity", async () => {
  const c = pod.spec.containers[0]!;
  const env = await resolveEnv(pod, c, () => Promise.resolve(undefined));
  assert.deepEqual(env, { POD: "p" });
  const spec = buildProcessSpec({
    pod,
    container: c,
    volumePaths: new Map([["v", "/h/v"]]),
    env,
    mountpointImage: { argv: ["mounter"] },
    defaultCwd: "/",
  });
  assert.deepEqual(spec.containerArgv, ["sh", "-c", "echo p > /h/v/x"]);
  assert.deepEqual(spec.argv.slice(0, 9), [
    "setsid",
    "setpriv",
    "--reuid",
    "10",
    "--regid",
    "0",
    "--groups",
    "20,30",
    "--",
  ]);
});

Deno.test("a Mountpoint Pod maps to the mounter and gets MOUNTER_COMM_DIR", () => {
  const mp = {
    ...pod,
    metadata: { ...pod.metadata, labels: { "s3.csi.scality.com/component": "mountpoint-pod" } },
    spec: {
      securityContext: { runAsUser: 1000, runAsGroup: 1000, runAsNonRoot: true },
      containers: [{
        name: "m",
        image: "img",
        args: ["--comm-dir", "/comm"],
        securityContext: { allowPrivilegeEscalation: false },
        volumeMounts: [{ name: "comm", mountPath: "/comm" }],
      }],
    },
  } as unknown as Pod;
  const spec = buildProcessSpec({
    pod: mp,
    container: mp.spec.containers[0]!,
    volumePaths: new Map([["comm", "/k/comm"]]),
    env: {},
    mountpointImage: { argv: ["deno", "run", "m.ts"], env: (uid) => ({ DENO_DIR: `/d/${uid}` }) },
    defaultCwd: "/",
  });
  assert.deepEqual(spec.containerArgv, ["deno", "run", "m.ts", "--comm-dir", "/k/comm"]);
  assert.equal(spec.env.MOUNTER_COMM_DIR, "/k/comm");
  assert.equal(spec.env.DENO_DIR, "/d/1000");
  assert.ok(spec.argv.includes("--no-new-privs"));
  assert.ok(spec.argv.includes("--clear-groups"));
});

Deno.test("runAsNonRoot without a user and a container without command are config errors", () => {
  const bad = { ...pod, spec: { ...pod.spec, securityContext: { runAsNonRoot: true } } } as Pod;
  assert.throws(
    () =>
      buildProcessSpec({
        pod: bad,
        container: { name: "c", command: ["true"] },
        volumePaths: new Map(),
        env: {},
        mountpointImage: { argv: [] },
        defaultCwd: "/",
      }),
    ContainerConfigError,
  );
  assert.throws(
    () =>
      buildProcessSpec({
        pod,
        container: { name: "c", image: "nginx" },
        volumePaths: new Map(),
        env: {},
        mountpointImage: { argv: [] },
        defaultCwd: "/",
      }),
    /has no command/,
  );
});
