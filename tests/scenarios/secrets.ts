/**
 * Per-volume credentials: a PV with `authenticationSource: secret` and a `nodePublishSecretRef`
 * holding the second S3 user's keys mounts that user's bucket (writes land there, owned by that
 * user), while the same Secret cannot mount the first user's bucket (PermissionDenied, shown as a
 * FailedMount event on the pod).
 *
 * @module
 */
import assert from "node:assert/strict";
import { SECRETS } from "../../src/kube/resources.ts";
import { waitFor } from "../_helpers.ts";
import { type Scenario, unique } from "./cluster.ts";

/** The scenario. */
export const SECRETS_PER_VOLUME: Scenario = {
  name: "per-volume secrets",
  nodes: 1,
  async run(e, step) {
    await step(
      "the second user's Secret mounts that user's bucket, not the first user's",
      async () => {
        const other = e.otherS3();
        const theirs = await e.otherUsersBucket("theirs");
        await e.put(theirs, "hello.txt", "owned by the second user\n", other);
        const mine = await e.bucket("mine");
        const secret = `s3-other-${unique()}`;
        await e.secret(
          secret,
          e.s3Env.S3_OTHER_ACCESS_KEY_ID!,
          e.s3Env.S3_OTHER_SECRET_ACCESS_KEY!,
        );
        const ok = `sec-ok-${unique()}`;
        const denied = `sec-denied-${unique()}`;
        const attributes = { authenticationSource: "secret" };
        await e.staticVolume(ok, { bucket: theirs, secret, attributes });
        await e.staticVolume(denied, { bucket: mine, secret, attributes });
        try {
          const out = await e.run({
            name: `sec-ok-${unique()}`,
            volumes: [{ claim: ok, mountPath: "/data" }],
            script: "set -e; cat /data/hello.txt; echo 'written with their keys' > /data/w.txt",
          });
          assert.match(out, /owned by the second user/);
          assert.equal(await e.get(theirs, "w.txt", other), "written with their keys\n");
          if (e.usersIsolated) {
            await assert.rejects(
              e.keys(theirs),
              "the first user cannot read the second user's bucket",
            );
          }

          const pod = await e.pod({
            name: `sec-denied-${unique()}`,
            volumes: [{ claim: denied, mountPath: "/data" }],
            script: "echo SHOULD-NOT-RUN",
          });
          const ev = await waitFor("a FailedMount event", async () => (await e.events(pod))[0], {
            timeoutMs: 30_000,
            intervalMs: 200,
          });
          assert.equal(ev.type, "Warning");
          assert.match(ev.message!, /PermissionDenied/);
          assert.match(
            ev.message!,
            new RegExp(
              `Access to bucket "${mine}" was denied for the secret credentials: check the keys and the bucket policy`,
            ),
          );
          assert.doesNotMatch(
            ev.message!,
            new RegExp(e.s3Env.S3_OTHER_ACCESS_KEY_ID!),
            "no access key id in the workload's events (the node plugin's log has it)",
          );
          assert.doesNotMatch(
            ev.message!,
            new RegExp(e.s3Env.S3_OTHER_SECRET_ACCESS_KEY!),
            "no secret",
          );
          assert.equal(await e.log(pod), "", "the container never started");
          await e.deletePod(pod.metadata.name);
          await e.waitReleased();
          assert.deepEqual(
            await e.mountpointPods(),
            [],
            "the failed mount's Mountpoint Pod is gone",
          );
          assert.deepEqual(await e.fuseMounts(), []);
          assert.deepEqual(await e.keys(mine), [], "nothing written to the first user's bucket");
        } finally {
          await e.dropVolume(ok);
          await e.dropVolume(denied);
          await e.client.delete(SECRETS, secret, e.ns).catch(() => false);
          await e.dropBucket(theirs, other);
          await e.dropBucket(theirs);
          await e.dropBucket(mine);
        }
      },
    );
  },
};
