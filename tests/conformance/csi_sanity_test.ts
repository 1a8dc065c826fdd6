/**
 * Conformance tier: csi-sanity (kubernetes-csi/csi-test, built from its Go module) against the
 * node plugin and the `s3-csi-controller` Controller service on RGW, with kubelet-style target
 * paths, a prepared S3PA and a running Mountpoint Pod behind every node publish (see
 * `README.md` and `_conformance.ts`).
 *
 * Each csi-sanity spec that must run is one test here; csi-sanity runs once, on the first test
 * that needs its results. Specs that do not run are listed with their reason in
 * `_skipped_specs.ts` and `README.md`, and one test checks that exactly those were skipped.
 */
import assert from "node:assert/strict";
import { dirname } from "node:path";
import { ROOT } from "../_helpers.ts";
import { skipReason } from "../node/_harness.ts";
import { type ConformanceResult, runConformance } from "./_conformance.ts";
import { csiSanityBinary, listSpecs, type SpecResult } from "./_sanity.ts";
import { removeOwnTree } from "./_remove_tree.ts";
import { EXCLUDED, expectedNotToRun, LISTED_VERSION, NOT_ADVERTISED } from "./_skipped_specs.ts";

const README = `${ROOT}tests/conformance/README.md`;

function say(line: string): void {
  Deno.stderr.writeSync(new TextEncoder().encode(`${line}\n`));
}

const OPTS = { sanitizeOps: false, sanitizeResources: false } as const;

function register(): Promise<void> | void {
  const reason = skipReason();
  if (reason) return skipAll(reason);
  return csiSanityBinary().then(async (bin) => {
    if ("skip" in bin) return skipAll(bin.skip);
    if ("error" in bin) {
      Deno.test("csi-sanity conformance: build csi-sanity", () => {
        throw new Error(bin.error);
      });
      return;
    }
    const prefix = "s3csi-sanity-list-";
    const dir = await Deno.makeTempDir({ prefix });
    let all: SpecResult[];
    try {
      all = await listSpecs(bin.path, dir);
    } finally {
      await removeOwnTree(dir, { parent: dirname(dir), namePrefix: prefix });
    }
    registerTests(bin.path, bin.version, all);
  });
}

function skipAll(reason: string): void {
  say(`SKIP csi-sanity conformance: ${reason}`);
  Deno.test({ name: `csi-sanity conformance (skipped: ${reason})`, ignore: true, fn() {} });
}

function registerTests(bin: string, version: string, all: SpecResult[]): void {
  const specs = all.filter((s) => s.status !== "pending").map((s) => s.name);
  const known = new Set(specs);
  // An older csi-sanity (built for an older Go) lacks some listed specs; it has no other ones.
  const absent = version === LISTED_VERSION
    ? []
    : [...expectedNotToRun().keys()].filter((s) => !known.has(s));
  const notRun = new Map([...expectedNotToRun()].filter(([s]) => !absent.includes(s)));
  let outcome: Promise<ConformanceResult> | undefined;
  const results = () =>
    outcome ??= runConformance({
      bin,
      skip: EXCLUDED.map((e) => e.spec),
      log: (l) => say(`  ${l}`),
    });
  const resultOf = (r: ConformanceResult, spec: string): SpecResult | undefined =>
    (spec.startsWith("Identity Service ") ? r.runs.identity : r.runs.main).specs.find((s) =>
      s.name === spec
    );

  Deno.test({
    name: "csi-sanity runs against the node plugin and the controller on RGW; nothing is left",
    ...OPTS,
    async fn() {
      const r = await results();
      const ran = [...r.runs.main.specs, ...r.runs.identity.specs].filter((s) =>
        s.status === "passed" || s.status === "failed"
      );
      say(
        `  csi-sanity ${version}: ${ran.filter((s) => s.status === "passed").length} passed, ` +
          `${ran.filter((s) => s.status === "failed").length} failed, ${notRun.size} not run ` +
          `(listed); tier ${r.seconds.toFixed(1)} s (csi-sanity ${
            (r.runs.main.seconds + r.runs.identity.seconds).toFixed(1)
          } s); Mountpoint Pods started ${r.mountpointPods.started}, retired ` +
          `${r.mountpointPods.retired}; publishes checked as FUSE binds ` +
          `${r.mountpointPods.verifiedMounts}; node calls ${JSON.stringify(r.calls)}`,
      );
      assert.deepEqual(r.problems, [], "the tier left something behind or a hook failed");
      assert.ok(
        r.mountpointPods.verifiedMounts > 0,
        "no NodePublishVolume of csi-sanity mounted a bucket",
      );
      assert.equal(r.mountpointPods.retired, r.mountpointPods.started);
    },
  });

  for (const spec of specs.filter((s) => !notRun.has(s))) {
    Deno.test({
      name: `csi-sanity: ${spec}`,
      ...OPTS,
      async fn() {
        const s = resultOf(await results(), spec);
        assert.ok(s, `csi-sanity did not report "${spec}"`);
        if (s.status === "skipped") {
          assert.fail(
            `csi-sanity skipped it ("${s.message}"): list it in _skipped_specs.ts or fix`,
          );
        }
        assert.equal(s.status, "passed", s.message.slice(0, 3000));
      },
    });
  }

  Deno.test({
    name: "csi-sanity: every spec that does not run is listed with its reason",
    ...OPTS,
    async fn() {
      const unknown = [...notRun.keys()].filter((s) => !known.has(s));
      assert.deepEqual(unknown, [], `listed specs that csi-sanity ${version} does not have`);
      if (absent.length) say(`  csi-sanity ${version} lacks ${absent.length} listed specs`);
      const r = await results();
      const wrong: string[] = [];
      for (const g of NOT_ADVERTISED) {
        for (const spec of g.specs.filter((s) => notRun.has(s))) {
          const s = resultOf(r, spec);
          if (s?.status !== "skipped" || !g.skipMessages.includes(s.message)) {
            wrong.push(
              `${spec}: expected skip (${g.capability} not advertised), got ${s?.status} ${
                s?.message ?? ""
              }`,
            );
          }
        }
      }
      for (const e of EXCLUDED) {
        const s = resultOf(r, e.spec);
        if (s?.status !== "skipped") wrong.push(`${e.spec}: excluded but ${s?.status}`);
      }
      assert.deepEqual(wrong, []);
      const readme = await Deno.readTextFile(README);
      const missing = [
        ...[...notRun.keys()].filter((s) => !readme.includes(`\`${s}\``)),
        ...NOT_ADVERTISED.map((g) => g.capability).filter((c) => !readme.includes(c)),
      ];
      assert.deepEqual(missing, [], `${README} must list every spec that does not run`);
    },
  });
}

await register();
