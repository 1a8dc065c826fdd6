/**
 * Full teardown without leaks: workloads on two nodes (a shared static volume, a per-volume
 * secret, a dynamic volume) run at the same time; after they are all deleted there is no FUSE mount
 * of the sandbox in /proc/self/mountinfo, no mounter or rclone process, no S3PA, no Mountpoint Pod,
 * no credential file under the kubelet dirs, no socket other than the driver's own, no pod dir.
 */
import assert from "node:assert/strict";
import type { KubeObject } from "../../src/kube/client.ts";
import { PVCS, SECRETS, STORAGE_CLASSES } from "../../src/kube/resources.ts";
import type { Pod } from "../testbed/kubelet/k8s_types.ts";
import { CREDENTIALS_FILE } from "../../src/node/credentials.ts";
import { readMountInfo } from "../../src/sys/mountinfo.ts";
import { runToEnd } from "../_helpers.ts";
import { type E2E, e2eTest, findFiles, NS, unique } from "./_e2e.ts";

async function credentialFiles(e: E2E): Promise<string[]> {
  return await findFiles(
    e.dir,
    (p, info) =>
      p.endsWith(`/${CREDENTIALS_FILE}`) || (info.isDirectory && p.endsWith("/credentials")),
  );
}

async function rcloneServing(buckets: string[]): Promise<string[]> {
  const r = await runToEnd("pgrep", ["-af", "rclone"]);
  return r.stdout.split("\n").filter((l) => buckets.some((b) => l.includes(b)));
}

e2eTest("e2e: full teardown leaves nothing behind", 2, async (e, t) => {
  await t.step(
    "workloads on two nodes deleted → no mount, process, S3PA, MP, credential, socket",
    async () => {
      const [n1, n2] = e.env.nodes.map((n) => n.name) as [string, string];
      const other = e.otherS3();
      const shared = await e.bucket("td-shared");
      const theirs = await e.bucket("td-theirs", other);
      const secret = `td-secret-${unique()}`;
      await e.secret(secret, e.s3Env.S3_OTHER_ACCESS_KEY_ID!, e.s3Env.S3_OTHER_SECRET_ACCESS_KEY!);
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
        metadata: { name: vDyn, namespace: NS },
        spec: {
          storageClassName: sc,
          accessModes: ["ReadWriteMany"],
          resources: { requests: { storage: "1Gi" } },
        },
      } as KubeObject);
      await e.waitBound(vDyn);

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
        await start(n1, [vShared]);
        await start(n1, [vShared, vSecret]);
        await start(n1, [vDyn], 2000);
        await start(n2, [vShared, vSecret, vDyn]);
        await start(n2, [vShared]);
        for (const p of pods) await e.waitLog(p, "READY");
        const mps = await e.mountpointPods();
        // node-1: shared (fsGroup 1000), secret, dyn (fsGroup 2000); node-2: shared, secret, dyn.
        assert.equal(mps.length, 6, `Mountpoint Pods: ${mps.map((p) => p.metadata.name)}`);
        assert.ok((await e.fuseMounts()).length >= 6 + 8, "sources and bind mounts are there");
        assert.ok((await credentialFiles(e)).length > 0, "credential files exist while mounted");
        // The detectors below see what runs now (so an empty answer later means something).
        const running = await e.strayProcesses();
        assert.ok(running.some((l) => /mounter/.test(l)), `mounters seen: ${running.join("\n")}`);
        assert.ok((await rcloneServing(buckets)).length > 0, "rclone engines seen");

        await Promise.all(pods.map((p) => e.deletePod(p.metadata.name)));
        await e.waitReleased();

        assert.deepEqual(await e.fuseMounts(), [], "no FUSE mount of the sandbox");
        assert.deepEqual(
          (await readMountPoints()).filter((m) => m.startsWith(`${e.dir}/`)),
          [],
          "no mount at all under the sandbox dir",
        );
        assert.deepEqual(await e.strayProcesses(), [], "no mounter, engine or workload process");
        assert.deepEqual(await rcloneServing(buckets), [], "no rclone serving our buckets");
        assert.deepEqual(await e.s3pas(), [], "no S3PA");
        assert.deepEqual(await e.mountpointPods(), [], "no Mountpoint Pod");
        assert.deepEqual(await credentialFiles(e), [], "no credential file");
        const expected = new Set([
          ...e.env.nodes.map((n) => n.socket),
          `${e.dir}/controller/csi.sock`,
        ]);
        const sockets = await findFiles(e.dir, (_p, info) => info.isSocket === true);
        assert.deepEqual(sockets.filter((s) => !expected.has(s)), [], "no socket but the driver's");
        for (const n of e.env.nodes) {
          const left = await Array.fromAsync(Deno.readDir(`${n.root}/pods`));
          assert.deepEqual(left.map((d) => d.name), [], `no pod dir left on ${n.name}`);
        }
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
        await e.client.delete(PVCS, vDyn, NS).catch(() => false);
        await e.dropVolume(vShared);
        await e.dropVolume(vSecret);
        await e.client.delete(SECRETS, secret, NS).catch(() => false);
        await e.dropBucket(shared);
        await e.dropBucket(theirs, other);
        other.destroy();
      }
    },
  );
});

async function readMountPoints(): Promise<string[]> {
  return (await readMountInfo()).map((m) => m.mountPoint);
}
