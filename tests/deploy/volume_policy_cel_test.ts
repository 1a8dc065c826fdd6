/**
 * The admission policies of volumes, evaluated with Kubernetes' own CEL libraries but without an
 * API server (`tests/testbed/services/kube_real/celcheck.sh`): every case of `_volume_cases.ts`
 * gets the driver's own answer and message, for the default rendering and for one whose nodes
 * default to the rclone engine. Needs no lock (nothing is started); the real-apiserver test
 * (`volume_policy_real_test.ts`) proves the same with the schemas' types and kubectl.
 *
 * @module
 */
import assert from "node:assert/strict";
import { renderVolumePolicies } from "../../src/deploy/render_volume_policy.ts";
import { resolveValues } from "../../src/deploy/values_validate.ts";
import type { Manifest } from "../../src/deploy/k8s_objects.ts";
import { ROOT, testOrSkip } from "../_helpers.ts";
import {
  driverMessage,
  nodeMessage,
  storageClassCases,
  type VolumeCase,
  volumeCases,
} from "./_volume_cases.ts";

function celcheck(): { bin?: string; reason?: string } {
  const r = new Deno.Command("bash", {
    args: [`${ROOT}tests/testbed/services/kube_real/celcheck.sh`],
    stdout: "piped",
    stderr: "piped",
  }).outputSync();
  const out = new TextDecoder().decode(r.stdout).trim().split("\n").at(-1) ?? "";
  const err = new TextDecoder().decode(r.stderr).trim().split("\n").at(-1) ?? "";
  if (r.code === 0 && out.startsWith("CELCHECK_BIN=")) return { bin: out.slice(13) };
  if (r.code === 3) return { reason: `celcheck cannot be built here: ${err}` };
  throw new Error(`celcheck.sh failed (${r.code}): ${err}`);
}

const tool = celcheck();

/** variables.problem of `policy` for each object, and the CEL cost. */
async function evaluate(
  policy: Manifest,
  objects: readonly Record<string, unknown>[],
): Promise<{ problem: string; cost: number }[]> {
  const file = await Deno.makeTempFile({ prefix: "s3csi-policy-", suffix: ".json" });
  try {
    await Deno.writeTextFile(file, JSON.stringify(policy));
    const child = new Deno.Command(tool.bin!, {
      args: [file],
      stdin: "piped",
      stdout: "piped",
      stderr: "piped",
    }).spawn();
    const lines = objects.map((o) =>
      JSON.stringify({ object: o, oldObject: null, operation: "CREATE" })
    );
    const writing = (async () => {
      const w = child.stdin.getWriter();
      await w.write(new TextEncoder().encode(lines.join("\n") + "\n"));
      await w.close();
    })();
    const [out] = await Promise.all([child.output(), writing.catch(() => {})]);
    const text = new TextDecoder().decode(out.stdout);
    assert.ok(out.success, `celcheck: ${text} ${new TextDecoder().decode(out.stderr)}`);
    return text.trim().split("\n").map((l) => JSON.parse(l));
  } finally {
    await Deno.remove(file);
  }
}

function policies(values: Record<string, unknown> = {}): Manifest[] {
  return renderVolumePolicies(resolveValues(values)).filter((o) =>
    o.kind === "ValidatingAdmissionPolicy"
  );
}

async function check(policy: Manifest, cases: readonly VolumeCase[], message = driverMessage) {
  const results = await evaluate(policy, cases.map((c) => c.object));
  let maxCost = 0;
  cases.forEach((c, i) => {
    const want = message(c);
    assert.equal(want === undefined, c.accepted, `${c.name}: the driver says ${want ?? "yes"}`);
    assert.equal(results[i]!.problem, want ?? "", c.name);
    maxCost = Math.max(maxCost, results[i]!.cost);
  });
  // Far below the API server's limit per expression (1,000,000) and per policy (10,000,000).
  assert.ok(maxCost < 100_000, `CEL cost ${maxCost}`);
}

testOrSkip(tool.reason, {
  name: "volume admission (CEL): every PersistentVolume case gets the node plugin's answer",
  fn: () => check(policies()[0]!, volumeCases()),
});

testOrSkip(tool.reason, {
  name: "volume admission (CEL): every StorageClass case gets the provisioner's answer",
  fn: () => check(policies()[1]!, storageClassCases()),
});

testOrSkip(tool.reason, {
  name: "volume admission (CEL): nodes that default to rclone hold volumes without an engine to it",
  async fn() {
    const rclone = policies({ node: { settings: { "default-engine": "rclone" } } })[0]!;
    const cases = volumeCases().filter((c) => c.name.startsWith("rclone: ")).map((c) => {
      const o = structuredClone(c.object) as {
        spec: { csi: { volumeAttributes: Record<string, string> } };
      };
      delete o.spec.csi.volumeAttributes.engine;
      return { ...c, object: o as unknown as Record<string, unknown> };
    });
    await check(rclone, cases, (c) => nodeMessage(c.object, undefined, "rclone"));
  },
});
