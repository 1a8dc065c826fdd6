/**
 * Full teardown without leaks: workloads on every node (a shared static volume, a per-volume
 * secret, a dynamic volume) run at the same time; after they are all deleted there is no FUSE mount
 * on the nodes, no mounter, engine or workload process, no S3PA, no Mountpoint Pod, no credential
 * file, no socket other than the driver's own, no pod dir.
 *
 * @module
 */
import assert from "node:assert/strict";
import type { KubeObject } from "../../src/kube/client.ts";
import { PVCS, SECRETS, STORAGE_CLASSES } from "../../src/kube/resources.ts";
import type { Pod } from "../testbed/kubelet/k8s_types.ts";
import { waitFor } from "../_helpers.ts";
import { type Scenario, unique } from "./cluster.ts";

/** The scenario. */
export const TEARDOWN: Scenario = {
  name: "full teardown leaves nothing behind",
  nodes: 1,
  async run(e, step) {
    await step(
      "workloads deleted → no mount, process, S3PA, MP, credential, socket, pod dir",
      async () => {
        const nodes = e.nodeNames();
        const other = e.otherS3();
        const shared = await e.bucket("td-shared");
        const theirs = await e.otherUsersBucket("td-theirs");
        const secret = `td-secret-${unique()}`;
        await e.secret(
          secret,
          e.s3Env.S3_OTHER_ACCESS_KEY_ID!,
          e.s3Env.S3_OTHER_SECRET_ACCESS_KEY!,
        );
        const vShared = `td-shared-${unique()}`;
        const vSecret = `td-secret-${unique()}`;
        await e.staticVolume(vShared, { bucket: shared });
        await e.staticVolume(vSecret, {
          bucket: theirs,
          secret,
          attributes: { authenticationSource: "secret" },
        });
        const sc = `td-sc-${unique()}`;
        await e.client.create(STORAGE_CLASSES, {
          metadata: { name: sc },
          provisioner: "s3.csi.scality.com",
          reclaimPolicy: "Delete",
          volumeBindingMode: "Immediate",
          mountOptions: ["allow-delete", "allow-overwrite"],
          parameters: { deletePolicy: "delete-all" },
        } as KubeObject);
        const vDyn = `td-dyn-${unique()}`;
        await e.client.create(PVCS, {
          metadata: { name: vDyn, namespace: e.ns },
          spec: {
            storageClassName: sc,
            accessModes: ["ReadWriteMany"],
            resources: { requests: { storage: "1Gi" } },
          },
        } as KubeObject);
        await e.waitBound(vDyn, 60_000);

        const pods: Pod[] = [];
        const start = async (node: string, claims: string[], fsGroup = 1000) => {
          const name = `td-${unique()}`;
          const pod = await e.pod({
            name,
            node,
            fsGroup,
            volumes: claims.map((claim, i) => ({ claim, mountPath: `/v${i}` })),
            script: `set -e; ${
              claims.map((_, i) => `echo "$POD_NAME" > /v${i}/$POD_NAME.txt`).join("; ")
            }; echo READY; exec sleep 300`,
            env: { POD_NAME: name },
          });
          pods.push(pod);
          return pod;
        };
        const buckets = [shared, theirs];
        try {
          // Node 1: shared (fsGroup 1000), secret, dyn (fsGroup 2000) → 3 Mountpoint Pods and 4
          // targets; a second node: shared, secret, dyn → 3 more and 4 targets.
          const [n1, n2] = nodes as [string, string | undefined];
          await start(n1, [vShared]);
          await start(n1, [vShared, vSecret]);
          await start(n1, [vDyn], 2000);
          if (n2) {
            await start(n2, [vShared, vSecret, vDyn]);
            await start(n2, [vShared]);
          }
          for (const p of pods) await e.waitLog(p, "READY");
          const mps = await e.mountpointPods();
          const perNode = 3;
          assert.equal(
            mps.length,
            perNode * nodes.length,
            `Mountpoint Pods: ${mps.map((p) => p.metadata.name)}`,
          );
          assert.ok(
            (await e.fuseMounts()).length >= (perNode + 4) * nodes.length,
            "sources and bind mounts are there",
          );
          assert.ok((await e.credentialFiles()).length > 0, "credential files exist while mounted");
          // The detectors below see what runs now (so an empty answer later means something).
          const running = await e.engineProcesses(buckets);
          // The mounter execs the engine's supervisor (rclone's too): either names the process.
          assert.ok(
            running.some((l) => /mounter|s3-csi-supervisor/.test(l)),
            `mounters seen: ${running.join("\n")}`,
          );
          assert.ok(
            running.some((l) => /rclone|mount-s3/.test(l)),
            `engines seen: ${running.join("\n")}`,
          );

          await Promise.all(pods.map((p) => e.deletePod(p.metadata.name)));
          await e.waitReleased();

          assert.deepEqual(await e.fuseMounts(), [], "no FUSE mount on the nodes");
          assert.deepEqual(
            await e.engineProcesses(buckets),
            [],
            "no mounter, engine or workload process",
          );
          assert.deepEqual(await e.s3pas(), [], "no S3PA");
          assert.deepEqual(await e.mountpointPods(), [], "no Mountpoint Pod");
          assert.deepEqual(await e.credentialFiles(), [], "no credential file");
          // The kubelet removes the dirs of deleted pods in its housekeeping (every 2 s), the
          // sockets in their emptyDirs with them (a Mountpoint Pod's supervisor removes its
          // custody.sock when it exits, but not when it is killed): the socket check follows.
          const uids = [...pods, ...mps].map((p) => p.metadata.uid);
          await waitFor(
            "no pod dir left",
            async () => (await e.leftoverPodDirs(uids)).length === 0,
            { timeoutMs: 20_000, intervalMs: 250 },
          ).catch(async (err) => {
            throw new Error(`${err}: ${(await e.leftoverPodDirs(uids)).join(", ")}`);
          });
          assert.deepEqual(await e.foreignSockets(), [], "no socket but the driver's");
          // Data written before the teardown is in S3.
          for (const p of pods.slice(0, 2)) {
            assert.equal(await e.get(shared, `${p.metadata.name}.txt`), `${p.metadata.name}\n`);
          }
          assert.equal(
            await e.get(theirs, `${pods[1]!.metadata.name}.txt`, other),
            `${pods[1]!.metadata.name}\n`,
          );
        } finally {
          for (const p of pods) await e.deletePod(p.metadata.name).catch(() => {});
          await e.client.delete(PVCS, vDyn, e.ns).catch(() => false);
          await e.client.delete(STORAGE_CLASSES, sc).catch(() => false);
          await e.dropVolume(vShared);
          await e.dropVolume(vSecret);
          await e.client.delete(SECRETS, secret, e.ns).catch(() => false);
          await e.dropBucket(shared);
          await e.dropBucket(theirs, other);
          await e.dropBucket(theirs);
        }
      },
    );
  },
};
