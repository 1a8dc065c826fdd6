/**
 * Real `kubectl` processes against the emulator over HTTPS + bearer token: the project's CRD and
 * `kubectl get s3pa` printer columns, pod CRUD, `get -w` with a field selector, server-side apply
 * of a Deployment (twice = no-op, conflicts), 409 on a stale update, `get events --sort-by`.
 * The kubectl is the suite's (built from the real tier's Go module), never the machine's.
 */
import assert from "node:assert/strict";
import { type ApiServer, startApiServer } from "../testbed/apiserver/api_server.ts";
import { s3paCrd } from "../../src/api/mountpoint_s3_pod_attachment.ts";
import { kubectl, kubectlTest, podManifest, waitFor } from "./_helpers.ts";
import { kubectlPath } from "../_helpers.ts";

let api: ApiServer | undefined;
async function server(): Promise<ApiServer> {
  api ??= await startApiServer({ port: 0, tls: true });
  return api;
}

function s3pa(name: string, nodeName: string): string {
  return JSON.stringify({
    apiVersion: "s3.csi.scality.com/v2",
    kind: "MountpointS3PodAttachment",
    metadata: { name },
    spec: {
      nodeName,
      persistentVolumeName: "pv-1",
      volumeID: "vol-1",
      mountOptions: "ro,allow-other",
      workloadFSGroup: "",
      authenticationSource: "driver",
      mountpointS3PodAttachments: {},
    },
  });
}

kubectlTest("kubectl applies the s3pa CRD and prints its columns", async () => {
  const { kubeconfigPath: kc } = await server();
  const crdFile = await Deno.makeTempFile({ suffix: ".json" });
  await Deno.writeTextFile(crdFile, JSON.stringify(s3paCrd()));
  const applied = await kubectl(kc, ["apply", "-f", crdFile]);
  assert.equal(applied.code, 0, applied.stderr);
  assert.match(
    applied.stdout,
    /customresourcedefinition.apiextensions.k8s.io\/mountpoints3podattachments.s3.csi.scality.com created/,
  );
  for (const [name, node] of [["s3pa-a", "node-a"], ["s3pa-b", "node-b"]]) {
    const r = await kubectl(kc, ["apply", "-f", "-"], { stdin: s3pa(name!, node!) });
    assert.equal(r.code, 0, r.stderr);
  }
  const get = await kubectl(kc, ["get", "s3pa"]);
  assert.equal(get.code, 0, get.stderr);
  const lines = get.stdout.trim().split("\n");
  assert.match(lines[0]!, /^NAME\s+NODE\s+PV NAME\s+MOUNT OPTIONS\s+AGE$/);
  assert.match(lines[1]!, /^s3pa-a\s+node-a\s+pv-1\s+ro,allow-other\s+\d+s$/);
  const selected = await kubectl(kc, [
    "get",
    "s3pa",
    "--field-selector",
    "spec.nodeName=node-b",
    "-o",
    "name",
  ]);
  assert.equal(selected.stdout.trim(), "mountpoints3podattachment.s3.csi.scality.com/s3pa-b");
  const bad = await kubectl(kc, ["apply", "-f", "-"], {
    stdin: s3pa("s3pa-bad", "").replace(
      '"authenticationSource":"driver"',
      '"authenticationSource":"nope"',
    ),
  });
  assert.notEqual(bad.code, 0);
  assert.match(
    bad.stderr,
    /spec.nodeName: Invalid value: "": spec.nodeName in body should be at least 1 chars long/,
  );
  assert.match(bad.stderr, /spec.authenticationSource: Unsupported value: "nope"/);
  await Deno.remove(crdFile);
});

kubectlTest("kubectl creates, gets, lists, patches and deletes pods", async () => {
  const { kubeconfigPath: kc } = await server();
  const created = await kubectl(kc, ["create", "-f", "-"], {
    stdin: podManifest("crud", "node-1", { app: "crud" }),
  });
  assert.equal(created.code, 0, created.stderr);
  const got = JSON.parse((await kubectl(kc, ["get", "pod", "crud", "-o", "json"])).stdout);
  assert.equal(got.spec.restartPolicy, "Always");
  assert.equal(got.status.phase, "Pending");
  const list = await kubectl(kc, ["get", "pods", "-l", "app=crud", "-o", "wide"]);
  assert.match(list.stdout, /crud\s+0\/1\s+Pending\s+0\s+\S+\s+<none>\s+node-1/);
  const patched = await kubectl(kc, [
    "patch",
    "pod",
    "crud",
    "-p",
    JSON.stringify({ spec: { containers: [{ name: "main", image: "busybox:1.37" }] } }),
  ]);
  assert.equal(patched.code, 0, patched.stderr);
  const image = await kubectl(kc, [
    "get",
    "pod",
    "crud",
    "-o",
    "jsonpath={.spec.containers[0].image}",
  ]);
  assert.equal(image.stdout, "busybox:1.37");
  const deleted = await kubectl(kc, ["delete", "pod", "crud", "--grace-period=0", "--force"]);
  assert.equal(deleted.code, 0, deleted.stderr);
  const gone = await kubectl(kc, ["get", "pod", "crud"]);
  assert.match(gone.stderr, /Error from server \(NotFound\): pods "crud" not found/);
});

kubectlTest("kubectl delete of a bound pod waits for the kubelet's confirmation", async () => {
  const { kubeconfigPath: kc } = await server();
  await kubectl(kc, ["create", "-f", "-"], { stdin: podManifest("graceful", "node-1") });
  const del = await kubectl(kc, ["delete", "pod", "graceful", "--wait=false"]);
  assert.equal(del.code, 0, del.stderr);
  const shown = await kubectl(kc, ["get", "pod", "graceful"]);
  assert.match(shown.stdout, /graceful\s+0\/1\s+Terminating/);
  // The kubelet (emulator) confirms with a grace-0 delete.
  const confirm = await kubectl(kc, ["delete", "pod", "graceful", "--grace-period=0", "--force"]);
  assert.equal(confirm.code, 0, confirm.stderr);
});

kubectlTest("kubectl get pods --field-selector spec.nodeName=<n> -w streams events", async () => {
  const emu = await server();
  const kc = emu.kubeconfigPath;
  const watchesBefore = emu.store.hub.size;
  // The suite's kubectl (kubectlTest skips this test without one).
  const child = new Deno.Command(kubectlPath()!, {
    args: [
      "get",
      "pods",
      "--field-selector",
      "spec.nodeName=watch-node",
      "-w",
      "--output-watch-events",
    ],
    env: { KUBECONFIG: kc },
    stdout: "piped",
    stderr: "null",
    signal: AbortSignal.timeout(20_000),
  }).spawn();
  let out = "";
  const reader = (async () => {
    for await (const chunk of child.stdout.pipeThrough(new TextDecoderStream())) out += chunk;
  })();
  try {
    await waitFor("kubectl's watch", () => emu.store.hub.size > watchesBefore, {
      timeoutMs: 10_000,
    });
    await kubectl(kc, ["create", "-f", "-"], { stdin: podManifest("w1", "watch-node") });
    await kubectl(kc, ["create", "-f", "-"], { stdin: podManifest("other", "other-node") });
    await kubectl(kc, ["label", "pod", "w1", "seen=yes"]);
    await kubectl(kc, ["delete", "pod", "w1", "--grace-period=0", "--force"]);
    await waitFor("DELETED event", () => /DELETED\s+w1/.test(out), { timeoutMs: 10_000 });
    assert.match(out, /ADDED\s+w1\s+0\/1\s+Pending/);
    assert.match(out, /MODIFIED\s+w1/);
    assert.doesNotMatch(out, /other/);
  } finally {
    child.kill();
    await child.status;
    await reader;
  }
});

kubectlTest(
  "kubectl apply --server-side of a Deployment twice is a no-op; conflicts are 409",
  async () => {
    const { kubeconfigPath: kc } = await server();
    const deployment = (image: string) =>
      JSON.stringify({
        apiVersion: "apps/v1",
        kind: "Deployment",
        metadata: { name: "ssa", namespace: "default" },
        spec: {
          selector: { matchLabels: { app: "ssa" } },
          template: {
            metadata: { labels: { app: "ssa" } },
            spec: { containers: [{ name: "c", image, ports: [{ containerPort: 80 }] }] },
          },
        },
      });
    const rv = async () =>
      (await kubectl(kc, ["get", "deploy", "ssa", "-o", "jsonpath={.metadata.resourceVersion}"]))
        .stdout;
    const first = await kubectl(kc, ["apply", "--server-side", "-f", "-"], {
      stdin: deployment("nginx:1"),
    });
    assert.equal(first.code, 0, first.stderr);
    const rv1 = await rv();
    const second = await kubectl(kc, ["apply", "--server-side", "-f", "-"], {
      stdin: deployment("nginx:1"),
    });
    assert.equal(second.code, 0, second.stderr);
    assert.equal(await rv(), rv1, "second apply must not change the object");
    const conflict = await kubectl(
      kc,
      ["apply", "--server-side", "--field-manager=other", "-f", "-"],
      {
        stdin: deployment("nginx:2"),
      },
    );
    assert.notEqual(conflict.code, 0);
    assert.match(
      conflict.stderr,
      /Apply failed with 1 conflict: conflict with "kubectl": .spec.template.spec.containers\[name="c"\].image/,
    );
    const forced = await kubectl(kc, [
      "apply",
      "--server-side",
      "--field-manager=other",
      "--force-conflicts",
      "-f",
      "-",
    ], {
      stdin: deployment("nginx:2"),
    });
    assert.equal(forced.code, 0, forced.stderr);
    const gen = await kubectl(kc, [
      "get",
      "deploy",
      "ssa",
      "-o",
      "jsonpath={.metadata.generation}",
    ]);
    assert.equal(gen.stdout, "2");
  },
);

kubectlTest("kubectl replace with a stale resourceVersion gets 409 Conflict", async () => {
  const { kubeconfigPath: kc } = await server();
  await kubectl(kc, ["create", "-f", "-"], {
    stdin: JSON.stringify({
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: { name: "stale" },
      data: { a: "1" },
    }),
  });
  const stale = (await kubectl(kc, ["get", "cm", "stale", "-o", "json"])).stdout;
  const label = await kubectl(kc, ["label", "cm", "stale", "x=y"]);
  assert.equal(label.code, 0, label.stderr);
  const replaced = await kubectl(kc, ["replace", "-f", "-"], { stdin: stale });
  assert.notEqual(replaced.code, 0);
  assert.match(
    replaced.stderr,
    /Error from server \(Conflict\): .*Operation cannot be fulfilled on configmaps "stale": the object has been modified; please apply your changes to the latest version and try again/,
  );
});

kubectlTest("kubectl's typed create generators (protobuf bodies) work", async () => {
  const { kubeconfigPath: kc } = await server();
  for (
    const args of [
      ["create", "namespace", "typed"],
      ["-n", "typed", "create", "configmap", "cm1", "--from-literal=a=b"],
      ["-n", "typed", "create", "secret", "generic", "s1", "--from-literal=k=v"],
      ["-n", "typed", "create", "serviceaccount", "sa1"],
    ]
  ) {
    const r = await kubectl(kc, args);
    assert.equal(r.code, 0, `${args.join(" ")}: ${r.stderr}`);
  }
  const cm = JSON.parse(
    (await kubectl(kc, ["-n", "typed", "get", "cm", "cm1", "-o", "json"])).stdout,
  );
  assert.deepEqual(cm.data, { a: "b" });
  const secret = JSON.parse(
    (await kubectl(kc, ["-n", "typed", "get", "secret", "s1", "-o", "json"])).stdout,
  );
  assert.deepEqual(secret.data, { k: "dg==" });
  assert.equal(secret.type, "Opaque");
  const dup = await kubectl(kc, ["create", "namespace", "typed"]);
  assert.match(
    dup.stderr,
    /Error from server \(AlreadyExists\): namespaces "typed" already exists/,
  );
});

kubectlTest(
  "kubectl get events -A --sort-by=.lastTimestamp lists core and events.k8s.io Events in time order",
  async () => {
    const { kubeconfigPath: kc } = await server();
    for (const ns of ["ev-a", "ev-b"]) {
      const r = await kubectl(kc, ["create", "namespace", ns]);
      assert.equal(r.code, 0, r.stderr);
    }
    const core = (ns: string, name: string, last: string, message: string) => ({
      apiVersion: "v1",
      kind: "Event",
      metadata: { name, namespace: ns },
      involvedObject: { kind: "Pod", name: "p", namespace: ns },
      reason: "Test",
      message,
      type: "Normal",
      source: { component: "kubectl-test" },
      firstTimestamp: last,
      lastTimestamp: last,
      count: 1,
    });
    const events = [
      core("ev-a", "third", "2026-01-01T00:00:03Z", "third-by-time"),
      core("ev-b", "first", "2026-01-01T00:00:01Z", "first-by-time"),
      {
        apiVersion: "events.k8s.io/v1",
        kind: "Event",
        metadata: { name: "second", namespace: "ev-a" },
        regarding: { kind: "Pod", name: "p", namespace: "ev-a" },
        reason: "Test",
        note: "second-by-time",
        type: "Normal",
        action: "Testing",
        reportingController: "kubectl-test",
        reportingInstance: "kubectl-test-1",
        eventTime: "2026-01-01T00:00:02.000000Z",
        deprecatedFirstTimestamp: "2026-01-01T00:00:02Z",
        deprecatedLastTimestamp: "2026-01-01T00:00:02Z",
        deprecatedCount: 1,
      },
    ];
    for (const ev of events) {
      const created = await kubectl(kc, ["create", "-f", "-"], { stdin: JSON.stringify(ev) });
      assert.equal(created.code, 0, `${created.stderr} (creating ${ev.metadata.name})`);
    }
    const r = await kubectl(kc, ["get", "events", "-A", "--sort-by=.lastTimestamp"]);
    assert.equal(r.code, 0, r.stderr);
    assert.doesNotMatch(r.stdout + r.stderr, /No resources found/);
    const order = r.stdout.split("\n").map((l) => /(first|second|third)-by-time/.exec(l)?.[1])
      .filter(Boolean);
    assert.deepEqual(order, ["first", "second", "third"], r.stdout);
    assert.match(r.stdout, /^NAMESPACE\s+LAST SEEN\s+TYPE\s+REASON\s+OBJECT\s+MESSAGE/);
  },
);

kubectlTest(
  "the shared emulator stops: its port refuses connections, kubectl says so",
  async () => {
    const { kubeconfigPath: kc, url } = await server();
    const port = Number(new URL(url).port);
    await api!.stop();
    api = undefined;
    await assert.rejects(
      Deno.connect({ hostname: "127.0.0.1", port }),
      Deno.errors.ConnectionRefused,
      "nothing listens on the emulator's port any more",
    );
    const r = await kubectl(kc, ["get", "namespaces"]);
    assert.notEqual(r.code, 0);
    assert.match(
      r.stderr,
      new RegExp(`127\\.0\\.0\\.1:${port} was refused|connection refused`),
      r.stderr,
    );
  },
);
