import assert from "node:assert/strict";
import { fingerprintChanges, parseFingerprint, podFingerprint } from "./pod_fingerprint.ts";
import { mountpointPodObject } from "./_test_fixtures.ts";
import type { MountpointPod } from "./mountpoint_pods.ts";

const pod = () => {
  const p = mountpointPodObject("mp-1") as MountpointPod;
  return { ...p, metadata: { ...p.metadata, uid: "uid-1" } } as MountpointPod;
};

Deno.test("pod fingerprint: status, labels, annotations, resources and key order do not count", () => {
  const a = pod();
  const b = structuredClone(a) as MountpointPod & { status: unknown };
  b.status = { phase: "Running", containerStatuses: [{ restartCount: 3 }] };
  b.metadata!.labels = { ...b.metadata!.labels, extra: "x" };
  b.metadata!.annotations = { ...b.metadata!.annotations, "s3.csi.scality.com/broken": "y" };
  const c = (b.spec as { containers: Record<string, unknown>[] }).containers[0]!;
  c.resources = { limits: { memory: "9Gi" } };
  // The same fields in another order (an API server may serialize them differently).
  (b.spec as { containers: unknown[] }).containers[0] = Object.fromEntries(
    Object.entries(c).reverse(),
  );
  assert.deepEqual(fingerprintChanges(podFingerprint(a), podFingerprint(b)), []);
});

Deno.test("pod fingerprint: image, command, env, volumes, ephemeral containers, uid count", () => {
  const edits: [string, (p: MountpointPod) => void][] = [
    [
      "containers",
      (p) => ((p.spec as { containers: { image: string }[] }).containers[0]!.image = "x"),
    ],
    [
      "containers",
      (p) => ((p.spec as { containers: { command: string[] }[] }).containers[0]!.command = ["sh"]),
    ],
    [
      "containers",
      (p) => ((p.spec as { containers: { env: unknown[] }[] }).containers[0]!.env = []),
    ],
    [
      "volumes",
      (
        p,
      ) => ((p.spec as { volumes: unknown[] }).volumes.push({
        name: "host",
        hostPath: { path: "/" },
      })),
    ],
    [
      "ephemeralContainers",
      (p) => ((p.spec as Record<string, unknown>).ephemeralContainers = [{ name: "d" }]),
    ],
    ["uid", (p) => (p.metadata!.uid = "uid-2")],
  ];
  for (const [part, edit] of edits) {
    const b = structuredClone(pod());
    edit(b);
    const changes = fingerprintChanges(podFingerprint(pod()), podFingerprint(b));
    assert.equal(changes.length, 1, part);
    assert.match(changes[0]!, new RegExp(`^${part} was `));
  }
});

Deno.test("pod fingerprint: read back from JSON; anything else is not one", () => {
  const f = podFingerprint(pod());
  assert.deepEqual(parseFingerprint(JSON.parse(JSON.stringify(f))), f);
  for (const bad of [undefined, null, "x", [], { uid: 1 }]) {
    assert.equal(parseFingerprint(bad), undefined, JSON.stringify(bad));
  }
});
