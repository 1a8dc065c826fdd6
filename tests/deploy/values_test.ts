/**
 * Values: defaults are valid, overrides from files and `--set` merge in order, and invalid values
 * (bad image, negative resources, unknown key, wrong type, unknown binary setting, …) fail with one
 * clear line per problem, naming the path.
 *
 * @module
 */
import assert from "node:assert/strict";
import { imageProblem } from "../../src/deploy/image_ref.ts";
import { defaultValues } from "../../src/deploy/values.ts";
import { loadValues, parseSetFlag } from "../../src/deploy/values_load.ts";
import { resolveValues, ValuesError } from "../../src/deploy/values_validate.ts";
import { ConfigError } from "../../src/util/errors.ts";
import { tempDir } from "../_helpers.ts";

function problems(...overrides: unknown[]): readonly string[] {
  try {
    resolveValues(...overrides);
  } catch (err) {
    assert.ok(err instanceof ValuesError, String(err));
    return err.problems;
  }
  assert.fail("values were accepted");
}

Deno.test("values: defaults are valid and documented defaults hold", () => {
  const v = resolveValues();
  assert.deepEqual(v, defaultValues());
  assert.equal(v.namespace, "kube-system");
  assert.equal(v.mountpointPod.namespace, "mount-s3");
  assert.equal(v.mountpointPod.priorityClassName, "mount-s3-critical");
});

Deno.test("values: each kind of invalid value gets a clear message naming its path", () => {
  const cases: [unknown, RegExp][] = [
    [{ image: { node: "ghcr.io/scality/Node:1" } }, /^image\.node: .* is not an image reference/],
    [
      { image: { livenessProbe: "registry.k8s.io/x" } },
      /^image\.livenessProbe: .*needs a tag or a digest/,
    ],
    [{ image: { node: "x/y@sha256:abc" } }, /^image\.node: /],
    [{ image: { tag: "1.0 beta" } }, /^image\.registry\/image\.tag: /],
    [
      { node: { resources: { limits: { memory: "-64Mi" } } } },
      /^node\.resources\.limits\.memory: must be a quantity ≥ 0/,
    ],
    [
      { controller: { resources: { requests: { cpu: "lots" } } } },
      /^controller\.resources\.requests\.cpu: must be a quantity/,
    ],
    [
      { node: { resources: { requests: { gpu: "1" } } } },
      /^node\.resources\.requests\.gpu: unknown resource/,
    ],
    [
      { node: { resources: { requests: { memory: "1Gi" }, limits: { memory: "64Mi" } } } },
      /requests\.memory is larger than limits\.memory/,
    ],
    [{ nodes: {} }, /^nodes: unknown key \(known keys here: version, namespace, /],
    [{ node: { kubletPath: "/x" } }, /^node\.kubletPath: unknown key/],
    [{ controller: { replicas: "two" } }, /^controller\.replicas: must be a number, got "two"/],
    [{ controller: { replicas: -1 } }, /^controller\.replicas: must be a whole number ≥ 0/],
    [
      { node: { settings: { "no-such-flag": "1" } } },
      /^node\.settings\.no-such-flag: s3-csi-node has no such setting/,
    ],
    [
      { node: { settings: { "kubelet-path": "/x" } } },
      /^node\.settings\.kubelet-path: set by the deployment itself/,
    ],
    [{ namespace: "Kube_System" }, /^namespace: must be a DNS label/],
    [{ node: { kubeletPath: "var/lib/kubelet" } }, /^node\.kubeletPath: must be an absolute path/],
    [{ node: { healthPort: 70000 } }, /^node\.healthPort: must be a port number/],
    [
      { node: { tolerations: [{ key: "a", operator: "Maybe" }] } },
      /^node\.tolerations\[0\]\.operator: must be Exists or Equal/,
    ],
    [{ csiDriver: { fsGroupPolicy: "Always" } }, /^csiDriver\.fsGroupPolicy: must be one of/],
    [{ s3: { endpointUrl: "s3.example.com" } }, /^s3\.endpointUrl: must be an http\(s\) URL/],
    [
      { tls: { caCertData: "-----BEGIN CERTIFICATE-----" } },
      /^tls\.caCertData: needs tls\.caCertConfigMap/,
    ],
    [{ mountpointPod: { uid: 0 } }, /^mountpointPod\.uid: must be a non-root uid/],
    [
      { mountpointPod: { command: "s3-csi-mounter" } },
      /^mountpointPod\.command: must be an absolute path/,
    ],
    [
      { mountpointPod: { workSizeLimit: "lots" } },
      /^mountpointPod\.workSizeLimit: must be a size of at least 1Mi/,
    ],
    [
      { mountpointPod: { cacheSizeLimit: "1Ki" } },
      /^mountpointPod\.cacheSizeLimit: must be a size of at least 1Mi/,
    ],
    [
      { controller: { settings: { "mountpoint-command": "/x" } } },
      /^controller\.settings\.mountpoint-command: set by the deployment itself/,
    ],
    [{ customLabels: { "bad key!": "x" } }, /^customLabels: "bad key!" is not a valid label key/],
    [{ image: "ghcr.io/x:1" }, /^image: must be an object/],
  ];
  for (const [override, want] of cases) {
    const got = problems(override);
    assert.ok(
      got.some((p) => want.test(p)),
      `${JSON.stringify(override)} → ${JSON.stringify(got)}`,
    );
  }
});

Deno.test("values: all problems are reported at once", () => {
  const got = problems({
    foo: 1,
    image: { node: "UPPER:1" },
    node: { resources: { limits: { cpu: "-1" } } },
  });
  assert.equal(got.length, 3, JSON.stringify(got));
});

Deno.test("values: files (YAML and JSON) then --set, later wins; strings coerced to the default's type", async () => {
  await using dir = await tempDir();
  const a = `${dir.path}/a.yaml`;
  const b = `${dir.path}/b.json`;
  await Deno.writeTextFile(
    a,
    "namespace: storage\nnode:\n  logLevel: debug\n  metricsPort: 9100\n",
  );
  await Deno.writeTextFile(b, JSON.stringify({ node: { logLevel: "warning" } }));
  const v = loadValues(
    `${a},${b}`,
    'controller.replicas=3,proxy.noProxy=a\\,b,node.nodeSelector={"pool":"s3"}',
  );
  assert.equal(v.namespace, "storage");
  assert.equal(v.node.logLevel, "warning");
  assert.equal(v.node.metricsPort, 9100);
  assert.equal(v.controller.replicas, 3);
  assert.equal(v.proxy.noProxy, "a,b");
  assert.deepEqual(v.node.nodeSelector, { pool: "s3" });
  await Deno.writeTextFile(a, "- not\n- a map\n");
  assert.throws(
    () => loadValues(a, undefined),
    (e) => e instanceof ConfigError && /top level/.test(e.message),
  );
  assert.throws(() => loadValues(`${dir.path}/missing.yaml`, undefined), /cannot be read/);
  assert.throws(() => parseSetFlag("novalue"), /must look like path\.to\.key=value/);
});

Deno.test("image references: tags, digests, registries with ports", () => {
  for (
    const ok of [
      "registry.k8s.io/sig-storage/livenessprobe:v2.19.0",
      `ghcr.io/scality/s3-csi-node@sha256:${"0".repeat(64)}`,
      `localhost:5000/a/b:1.0@sha256:${"f".repeat(64)}`,
      "busybox:1.36",
    ]
  ) assert.equal(imageProblem(ok), undefined, ok);
  for (const bad of ["busybox", "Busybox:1", "a//b:1", "a:b:c", "x@sha256:123", ":1"]) {
    assert.ok(imageProblem(bad), bad);
  }
});
