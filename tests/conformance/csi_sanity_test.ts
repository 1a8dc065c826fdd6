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
import { ENTRYPOINTS, ROOT } from "../_helpers.ts";
import { MP_UID, skipReason } from "../testbed/harness/node_harness.ts";
import {
  ConformanceError,
  type ConformanceResult,
  runConformance,
  VARIANTS,
} from "./_conformance.ts";
import { formatLogTails, type LogTails } from "./_log_tail.ts";
import { csiSanityBinary, listSpecs, type SanityRun, type SpecResult } from "./_sanity.ts";
import { removeOwnTree } from "./_remove_tree.ts";
import { EXCLUDED, expectedNotToRun, LISTED_VERSION, NOT_ADVERTISED } from "./_skipped_specs.ts";

const README = `${ROOT}tests/conformance/README.md`;

function say(line: string): void {
  Deno.stderr.writeSync(new TextEncoder().encode(`${line}\n`));
}

const OPTS = { sanitizeOps: false, sanitizeResources: false } as const;

let tailsShown = false;
/**
 * Print the node plugin's and the controller's log tails, once per tier run: the first failing
 * spec or leftover gets them (the logs are the same for every later failure).
 */
function showLogTails(logs: LogTails, why: string): void {
  if (tailsShown) return;
  tailsShown = true;
  say(formatLogTails(logs, `${why}; driver logs (printed once per run):`));
}

/**
 * Mountpoint Pods are the mounter binary run from this checkout as uid 1000: a checkout that user
 * cannot read (e.g. under a 0700 `/root`) makes every publish wait for a mounter that never starts.
 */
function mounterSourceProblem(): string | undefined {
  const path = ENTRYPOINTS.mounter;
  const r = new Deno.Command("setpriv", {
    args: [`--reuid=${MP_UID}`, `--regid=${MP_UID}`, "--clear-groups", "test", "-r", path],
    stdin: "null",
    stdout: "null",
    stderr: "null",
  }).outputSync();
  if (r.success) return undefined;
  return `uid ${MP_UID} (the Mountpoint Pods' user) cannot read ${path}: run the tier from a ` +
    `checkout every user can read (not under a 0700 home directory)`;
}

function register(): Promise<void> | void {
  const reason = skipReason({ defaultEngine: "mount-s3" }) ?? mounterSourceProblem();
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
    }).catch((err) => {
      if (err instanceof ConformanceError) showLogTails(err.logs, err.message);
      throw err;
    });
  const isIdentity = (spec: string) => spec.startsWith("Identity Service ");
  /** The runs a spec belongs to: the identity run, or every main run (one per variant). */
  const runsOf = (r: ConformanceResult, spec: string): [string, SanityRun][] =>
    isIdentity(spec) ? [["identity", r.runs.identity]] : Object.entries(r.runs.main);
  const find = (run: SanityRun, spec: string) => run.specs.find((s) => s.name === spec);

  Deno.test({
    name: "csi-sanity runs against the node plugin and the controller on RGW; nothing is left",
    ...OPTS,
    async fn() {
      const r = await results();
      const runs = [...Object.values(r.runs.main), r.runs.identity];
      const count = (status: string) =>
        runs.reduce((n, run) => n + run.specs.filter((s) => s.status === status).length, 0);
      say(
        `  csi-sanity ${version}: ${count("passed")} passed, ${count("failed")} failed in ` +
          `${runs.length} runs (${VARIANTS.map((v) => v.name).join("; ")}; identity), ` +
          `${notRun.size} specs not run (listed); tier ${r.seconds.toFixed(1)} s (csi-sanity ${
            runs.reduce((n, run) => n + run.seconds, 0).toFixed(1)
          } s); Mountpoint Pods started ${r.mountpointPods.started}, retired ` +
          `${r.mountpointPods.retired}; publishes checked as FUSE binds ` +
          `${r.mountpointPods.verifiedMounts}; node calls ${JSON.stringify(r.calls)}`,
      );
      const pods = r.mountpointPods;
      if (r.problems.length > 0 || pods.verifiedMounts === 0 || pods.retired !== pods.started) {
        showLogTails(
          r.logs,
          `${r.problems.length} things left behind or hook errors; Mountpoint Pods started ` +
            `${pods.started}, retired ${pods.retired}; verified publishes ${pods.verifiedMounts}`,
        );
      }
      assert.deepEqual(r.problems, [], "the tier left something behind or a hook failed");
      assert.ok(
        r.mountpointPods.verifiedMounts > 0,
        "no NodePublishVolume of csi-sanity mounted a bucket",
      );
      assert.equal(r.mountpointPods.retired, r.mountpointPods.started);
    },
  });

  const mustRun = specs.filter((s) => !notRun.has(s));
  type Case = { spec: string; variant: string | undefined };
  const cases = mustRun.flatMap((spec): Case[] =>
    isIdentity(spec)
      ? [{ spec, variant: undefined }]
      : VARIANTS.map((v) => ({ spec, variant: v.name }))
  );
  for (const { spec, variant } of cases) {
    Deno.test({
      name: variant ? `csi-sanity (${variant}): ${spec}` : `csi-sanity: ${spec}`,
      ...OPTS,
      async fn() {
        const r = await results();
        const run = variant ? r.runs.main[variant] : r.runs.identity;
        assert.ok(run, `no csi-sanity run for ${variant}`);
        const s = find(run, spec);
        if (s?.status !== "passed") {
          showLogTails(r.logs, `csi-sanity ${variant ? `(${variant}) ` : ""}${spec}: ${s?.status}`);
        }
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
          for (const [name, run] of runsOf(r, spec)) {
            const s = find(run, spec);
            if (s?.status !== "skipped" || !g.skipMessages.includes(s.message)) {
              wrong.push(
                `${spec} (${name}): expected skip (${g.capability} not advertised), got ${s?.status} ${
                  s?.message ?? ""
                }`,
              );
            }
          }
        }
      }
      for (const e of EXCLUDED) {
        for (const [name, run] of runsOf(r, e.spec)) {
          const s = find(run, e.spec);
          if (s?.status !== "skipped") wrong.push(`${e.spec} (${name}): excluded but ${s?.status}`);
        }
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
