/**
 * User-visible failures: a volume that cannot be mounted leaves the pod Pending (no container)
 * with `FailedMount` warning events whose message says what is wrong and what to do — a missing
 * bucket, keys S3 refuses, a mount option the allow-list refuses, an unknown mount option (on a
 * cluster running the driver's admission policies the last two PVs are refused at creation, with
 * the same words). Deleting the pod then leaves nothing behind.
 *
 * @module
 */
import assert from "node:assert/strict";
import { PODS, SECRETS } from "../../src/kube/resources.ts";
import type { Pod } from "../testbed/kubelet/k8s_types.ts";
import { waitFor } from "../_helpers.ts";
import { type KubeEvent, type Scenario, type ScenarioCluster, unique } from "./cluster.ts";

async function failedMount(e: ScenarioCluster, claim: string): Promise<KubeEvent> {
  const pod = await e.pod({
    name: `fail-${unique()}`,
    volumes: [{ claim, mountPath: "/data" }],
    script: "echo SHOULD-NOT-RUN",
  });
  try {
    const ev = await waitFor("a FailedMount event", async () => (await e.events(pod))[0], {
      timeoutMs: 30_000,
      intervalMs: 200,
    });
    assert.equal(ev.type, "Warning");
    assert.equal(ev.reason, "FailedMount");
    assert.equal(ev.involvedObject?.kind, "Pod");
    assert.match(ev.message!, /^MountVolume\.SetUp failed for volume "[^"]+" : rpc error: /);
    const p = await e.client.get<Pod>(PODS, pod.metadata.name, e.ns);
    assert.equal(p?.status?.phase ?? "Pending", "Pending", "the pod waits for its volume");
    assert.equal(await e.log(pod), "", "no container started");
    return ev;
  } finally {
    await e.deletePod(pod.metadata.name);
  }
}

/** The scenario. */
export function failuresScenario(): Scenario {
  return {
    name: "user-visible failures as pod events",
    nodes: 1,
    async run(e, step) {
      await step("missing bucket → FailedMount: create it or fix bucketName", async () => {
        const bucket = `missing-${unique()}`;
        const vol = `fail-nobucket-${unique()}`;
        await e.staticVolume(vol, { bucket });
        try {
          const ev = await failedMount(e, vol);
          assert.match(ev.message!, /code = FailedPrecondition/);
          assert.match(
            ev.message!,
            new RegExp(
              `Bucket "${bucket}" does not exist on \\S+: create it or fix volumeAttributes\\.bucketName`,
            ),
          );
        } finally {
          await e.dropVolume(vol);
        }
      });

      await step("access denied (wrong keys) → FailedMount: check the keys", async () => {
        const bucket = await e.bucket("denied");
        const secret = `wrong-keys-${unique()}`;
        await e.secret(secret, "WRONGACCESSKEY000001", "wrongSecretKey00000000000000000000000001");
        const vol = `fail-denied-${unique()}`;
        await e.staticVolume(vol, {
          bucket,
          secret,
          attributes: { authenticationSource: "secret" },
        });
        try {
          const ev = await failedMount(e, vol);
          assert.match(ev.message!, /code = PermissionDenied/);
          assert.match(
            ev.message!,
            new RegExp(
              `Access to bucket "${bucket}" was denied for the secret credentials: check the keys and the bucket policy`,
            ),
          );
          assert.doesNotMatch(ev.message!, /wrongSecretKey/, "the secret key is never shown");
          assert.doesNotMatch(
            ev.message!,
            /WRONGACCESSKEY/,
            "nor the access key id (only the log has it)",
          );
        } finally {
          await e.dropVolume(vol);
          await e.client.delete(SECRETS, secret, e.ns).catch(() => false);
          await e.dropBucket(bucket);
        }
      });

      await step(
        "forbidden mount option → refused at creation (admission) or FailedMount, naming it and why",
        async () => {
          const bucket = await e.bucket("badopt");
          const cases: [string, string[], RegExp][] = [
            [
              `fail-opt-${unique()}`,
              ["allow-delete", "endpoint-url=http://elsewhere.example:9000"],
              /Mount option "endpoint-url=http:\/\/elsewhere\.example:9000" is not allowed: the S3 endpoint is set for the whole driver.*node-publish Secret \(key endpoint\)/,
            ],
            [
              `fail-unknown-${unique()}`,
              ["allow-delete", "turbo-mode"],
              /Mount option "turbo-mode" is not supported; remove it from the PersistentVolume's mountOptions \(supported: .*allow-delete/,
            ],
          ];
          try {
            for (const [vol, mountOptions, message] of cases) {
              if (e.volumeAdmission) {
                // The admission policy refuses the PV with the node plugin's own words.
                const err = await e.staticVolume(vol, { bucket, mountOptions }).then(
                  () => undefined,
                  (x: unknown) => x as Error,
                );
                assert.ok(err, `${vol} was admitted`);
                assert.match(
                  err.message,
                  /ValidatingAdmissionPolicy 's3-csi-volumes'.* denied request: /,
                );
                assert.match(err.message, message);
                continue;
              }
              await e.staticVolume(vol, { bucket, mountOptions });
              const ev = await failedMount(e, vol);
              assert.match(ev.message!, /code = InvalidArgument/);
              assert.match(ev.message!, message);
            }
          } finally {
            for (const [vol] of cases) await e.dropVolume(vol).catch(() => {});
            await e.dropBucket(bucket);
          }
        },
      );

      await step(
        "the failed mounts leave no attachment, Mountpoint Pod, mount or credential file",
        async () => {
          // Each failed publish marked its Mountpoint Pod needs-unmount and wrote mount.exit: the
          // mounter exits (it was waiting for a mount message) and the controller deletes the pod.
          await e.waitReleased();
          assert.deepEqual(await e.mountpointPods(), [], "no Mountpoint Pod still running");
          assert.deepEqual(await e.s3pas(), [], "no attachment");
          assert.deepEqual(await e.fuseMounts(), []);
          assert.deepEqual(await e.credentialFiles(), [], "no credential file left");
          assert.deepEqual(await e.engineProcesses([]), [], "no mounter or engine process left");
        },
      );
    },
  };
}
