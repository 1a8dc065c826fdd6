/**
 * CSI inline (ephemeral) volumes: a pod names the bucket, its options and its own Secret in a
 * `csi:` volume of its spec, with no PV or claim. The controller still gives it a Mountpoint Pod
 * and an S3PA; two pods with identical inline volumes get one each (kubelet's handle of an inline
 * volume is per pod); the data lands in the bucket and outlives the pods; nothing of them is left
 * once they are gone. Refused: driver credentials (any pod author could otherwise read what the
 * driver can), and, where users are isolated, another user's Secret on the bucket.
 *
 * @module
 */
import assert from "node:assert/strict";
import { SECRETS } from "../../src/kube/resources.ts";
import { sourceMountRoot } from "../../src/mppod/paths.ts";
import { createHash } from "node:crypto";
import { waitFor } from "../_helpers.ts";
import type { Pod } from "../testbed/kubelet/k8s_types.ts";
import { type Scenario, type ScenarioCluster, unique } from "./cluster.ts";

interface S3paSpec {
  persistentVolumeName?: string;
  volumeID?: string;
  authenticationSource?: string;
  secretName?: string;
  mountpointS3PodAttachments?: Record<string, { workloadPodUID: string }[]>;
}

/** The S3PA that lists `pod`. */
async function attachmentOf(e: ScenarioCluster, pod: Pod): Promise<S3paSpec | undefined> {
  return (await e.s3pas()).map((s) => s.spec as S3paSpec).find((s) =>
    Object.values(s.mountpointS3PodAttachments ?? {}).flat().some((w) =>
      w.workloadPodUID === pod.metadata.uid
    )
  );
}

/** A FailedMount event of `pod` whose message matches `re`. */
async function failedMount(e: ScenarioCluster, pod: Pod, re: RegExp): Promise<string> {
  const ev = await waitFor(
    `a FailedMount event of ${pod.metadata.name} matching ${re}`,
    async () => (await e.events(pod)).find((x) => re.test(x.message ?? "")),
    { timeoutMs: 45_000, intervalMs: 200 },
  );
  return ev.message!;
}

/** The scenario. */
export const INLINE_VOLUMES: Scenario = {
  name: "inline (ephemeral) volumes",
  nodes: 1,
  async run(e, step) {
    const node = e.nodeNames()[0]!;
    const bucket = await e.bucket("inline");
    const secret = `inline-${unique()}`;
    await e.secret(secret, e.s3Env.AWS_ACCESS_KEY_ID, e.s3Env.AWS_SECRET_ACCESS_KEY);
    const inline = (
      attributes: Record<string, string>,
      secretName: string | undefined = secret,
    ) => ({
      mountPath: "/data",
      inline: {
        attributes: {
          bucketName: bucket,
          mountOptions: "allow-delete,allow-overwrite,prefix=team/",
          ...attributes,
        },
        ...(secretName ? { secret: secretName } : {}),
      },
    });
    try {
      await step(
        "a pod's own csi volume: its bucket, options and Secret; its own Mountpoint Pod; data stays in S3",
        async () => {
          const started: string[] = [];
          const start = async (prefix: string, script: string) => {
            const pod = await e.pod({
              name: `${prefix}-${unique()}`,
              node,
              volumes: [inline({})],
              script: `set -e; ${script}; echo READY; exec sleep 300`,
            });
            started.push(pod.metadata.name);
            await e.waitLog(pod, "READY");
            return pod;
          };
          try {
            const a = await start("inline-a", "echo from-a > /data/a.txt; ls /data");
            assert.equal(await e.get(bucket, "team/a.txt"), "from-a\n", "under the prefix");
            const b = await start("inline-b", "cat /data/a.txt; echo from-b > /data/b.txt");
            assert.match(await e.log(b), /from-a/, "same bucket and prefix: B reads A's file");
            assert.equal(await e.get(bucket, "team/b.txt"), "from-b\n");

            const [sa, sb] = [await attachmentOf(e, a), await attachmentOf(e, b)];
            assert.ok(sa && sb, "each pod is attached");
            const handle = (uid: string) =>
              `csi-${createHash("sha256").update(`${uid}v0`).digest("hex")}`;
            assert.deepEqual(
              [sa.persistentVolumeName, sa.volumeID, sa.authenticationSource, sa.secretName],
              ["v0", handle(a.metadata.uid), "secret", secret],
              "named by the pod's volume and kubelet's per-pod handle, with the pod's Secret",
            );
            assert.equal(sb.volumeID, handle(b.metadata.uid));
            const [mpA, mpB] = [await e.mountpointPodOf(a), await e.mountpointPodOf(b)];
            assert.ok(mpA && mpB && mpA !== mpB, "identical inline volumes: a Mountpoint Pod each");
            assert.equal((await e.mountpointPods()).length, 2);
            const fuse = await e.fuseMounts();
            const root = sourceMountRoot(e.kubeletRoot(node));
            assert.equal(fuse.filter((m) => m.mountPoint.startsWith(`${root}/`)).length, 2);
            assert.equal(new Set(fuse.map((m) => m.majorMinor)).size, 2, "two FUSE connections");
          } finally {
            for (const name of started) await e.deletePod(name);
          }
          await e.waitReleased();
          assert.deepEqual(await e.fuseMounts(), [], "nothing mounted");
          assert.deepEqual(await e.credentialFiles(), [], "no credentials left");
          assert.deepEqual(
            await e.keys(bucket),
            ["team/a.txt", "team/b.txt"],
            "the bucket and its data outlive the inline volumes",
          );
        },
      );

      await step(
        "refused: the driver's credentials, and another user's Secret on the bucket",
        async () => {
          const pods: Pod[] = [];
          try {
            const driver = await e.pod({
              name: `inline-driver-${unique()}`,
              node,
              volumes: [inline({ authenticationSource: "driver" }, undefined)],
              script: "echo SHOULD-NOT-RUN",
            });
            pods.push(driver);
            const refused = /Inline volumes cannot use authenticationSource "driver"/;
            assert.match(await failedMount(e, driver, refused), /InvalidArgument/);
            const why = await waitFor(
              "the controller's InvalidInlineVolume event",
              async () => (await e.events(driver, "InvalidInlineVolume"))[0],
              { timeoutMs: 30_000, intervalMs: 200 },
            );
            assert.match(why.message!, refused);
            assert.equal(await attachmentOf(e, driver), undefined, "no Mountpoint Pod for it");
            if (e.usersIsolated) {
              const other = `inline-other-${unique()}`;
              await e.secret(
                other,
                e.s3Env.S3_OTHER_ACCESS_KEY_ID!,
                e.s3Env.S3_OTHER_SECRET_ACCESS_KEY!,
              );
              const denied = await e.pod({
                name: `inline-denied-${unique()}`,
                node,
                volumes: [inline({}, other)],
                script: "echo SHOULD-NOT-RUN",
              });
              pods.push(denied);
              await failedMount(
                e,
                denied,
                new RegExp(`PermissionDenied.*Access to bucket "${bucket}" was denied`),
              );
              await e.client.delete(SECRETS, other, e.ns).catch(() => false);
            }
            for (const p of pods) assert.equal(await e.log(p), "", "never started");
          } finally {
            for (const p of pods) await e.deletePod(p.metadata.name);
          }
          await e.waitReleased();
          assert.deepEqual(await e.fuseMounts(), []);
          assert.deepEqual(await e.keys(bucket), ["team/a.txt", "team/b.txt"]);
        },
      );
    } finally {
      await e.client.delete(SECRETS, secret, e.ns).catch(() => false);
      await e.dropBucket(bucket);
    }
  },
};
