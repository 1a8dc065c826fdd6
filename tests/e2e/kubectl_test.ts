/**
 * The commands the sandbox suggests, run with the suite's kubectl against a sandbox: `kubectl get
 * events -A --sort-by=.lastTimestamp` lists the run's events in time order, and `kubectl logs`
 * reads a workload's container log from the kubelet emulator (current run, `--previous` after a
 * restart, `--tail`, `-f` until the container ends), with the API server's error for a pod whose
 * volume cannot be mounted.
 */
import assert from "node:assert/strict";
import { kubectl, kubectlSkipReason, waitFor } from "../_helpers.ts";
import { unique } from "../scenarios/cluster.ts";
import { e2eTest, NS } from "../testbed/harness/e2e_cluster.ts";

e2eTest("e2e: kubectl get events --sort-by and kubectl logs on sandbox pods", 1, async (e, t) => {
  const kc = `${e.dir}/kubeconfig`;
  const bucket = await e.bucket("kubectl");
  const vol = `kubectl-${unique()}`;
  await e.staticVolume(vol, { bucket });
  const name = `logs-${unique()}`;
  try {
    await t.step("kubectl logs: current run, --previous after a restart, --tail, -f", async () => {
      // Fails once (the marker is not in the bucket yet), then succeeds: one restart.
      const pod = await e.pod({
        name,
        restartPolicy: "OnFailure",
        volumes: [{ claim: vol, mountPath: "/data" }],
        script: "if [ -e /data/marker ]; then echo second run; echo line two; exit 0; fi; " +
          "echo first run; touch /data/marker; exit 1",
      });
      await e.waitPhase(pod, ["Succeeded"], 90_000);
      const current = await kubectl(kc, ["logs", "-n", NS, name]);
      assert.equal(current.code, 0, current.stderr);
      assert.equal(current.stdout, "second run\nline two\n");
      const previous = await kubectl(kc, ["logs", "-n", NS, name, "--previous"]);
      assert.equal(previous.code, 0, previous.stderr);
      assert.equal(previous.stdout, "first run\n");
      const tail = await kubectl(kc, ["logs", "-n", NS, name, "--tail=1"]);
      assert.equal(tail.stdout, "line two\n");
      // -f on a finished container prints the log and ends.
      const follow = await kubectl(kc, ["logs", "-n", NS, name, "-f"], { timeoutMs: 30_000 });
      assert.equal(follow.code, 0, follow.stderr);
      assert.equal(follow.stdout, "second run\nline two\n");
      await e.deletePod(name);
    });

    await t.step("kubectl logs of a pod whose volume cannot be mounted says it waits", async () => {
      const missing = `missing-${unique()}`;
      await e.staticVolume(missing, { bucket: `no-such-bucket-${unique()}` });
      const pending = `pending-${unique()}`;
      try {
        const pod = await e.pod({
          name: pending,
          volumes: [{ claim: missing, mountPath: "/data" }],
          script: "echo never",
        });
        await waitFor("a FailedMount event", async () => (await e.events(pod))[0], {
          timeoutMs: 30_000,
          intervalMs: 200,
        });
        const r = await kubectl(kc, ["logs", "-n", NS, pending]);
        assert.notEqual(r.code, 0);
        assert.match(
          r.stderr,
          new RegExp(`container "main" in pod "${pending}" is waiting to start: ContainerCreating`),
        );
      } finally {
        await e.deletePod(pending);
        await e.dropVolume(missing);
      }
    });

    await t.step(
      "kubectl get events -A --sort-by=.lastTimestamp: the run's events in order",
      async () => {
        const r = await kubectl(kc, ["get", "events", "-A", "--sort-by=.lastTimestamp"]);
        assert.equal(r.code, 0, r.stderr);
        assert.doesNotMatch(r.stdout + r.stderr, /No resources found/);
        const rows = r.stdout.trim().split("\n");
        assert.match(rows[0]!, /^NAMESPACE\s+LAST SEEN\s+TYPE\s+REASON\s+OBJECT\s+MESSAGE/);
        assert.ok(rows.some((l) => l.includes(`pod/${name}`) && /Started/.test(l)), r.stdout);
        assert.ok(rows.some((l) => /FailedMount/.test(l)), r.stdout);
        // In time order: the API's lastTimestamps, sorted, match the printed order.
        const json = await kubectl(kc, [
          "get",
          "events",
          "-A",
          "--sort-by=.lastTimestamp",
          "-o",
          "json",
        ]);
        const stamps = (JSON.parse(json.stdout).items as { lastTimestamp?: string }[])
          .map((ev) => ev.lastTimestamp ?? "");
        assert.ok(stamps.length >= 3, json.stdout.slice(0, 500));
        assert.deepEqual(stamps, [...stamps].sort());
      },
    );
  } finally {
    await e.dropVolume(vol);
    await e.dropBucket(bucket);
  }
}, kubectlSkipReason());
