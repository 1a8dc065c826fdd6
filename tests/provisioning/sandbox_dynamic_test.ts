/**
 * Dynamic provisioning in the sandbox: the sandbox's parts (API emulator, scheduler, PV binder,
 * kubelet emulator, node plugin, RGW) plus the controller process serving the Controller service
 * on `--csi-endpoint` and the csi-provisioner emulation on its socket. PVCs of three StorageClasses
 * become PVs, one pod mounts all three and writes, and deleting the PVCs applies each policy.
 * The teardown must leave nothing mounted or running under the sandbox's dir, and no driver
 * process may have crashed.
 *
 * Needs root, /dev/fuse and rclone (like the sandbox tier); skips with the reason otherwise.
 */
import assert from "node:assert/strict";
import { GetObjectCommand, ListObjectsV2Command, PutObjectCommand } from "@aws-sdk/client-s3";
import { EVENTS, PODS, PVCS, PVS, STORAGE_CLASSES } from "../../src/kube/resources.ts";
import type { PersistentVolume, PersistentVolumeClaim, Pod } from "../../src/kube/types.ts";
import { describeCrashes } from "../testbed/sandbox/child_process.ts";
import { cleanUpLeftovers, leftoversOf } from "../testbed/sandbox/leftovers.ts";
import { SandboxEnv } from "../testbed/sandbox/sandbox_env.ts";
import { StepReporter } from "../testbed/sandbox/step_reporter.ts";
import { writeStderr } from "../../src/util/stdio.ts";
import { testOrSkip, waitFor } from "../_helpers.ts";
import { unique } from "./_rgw.ts";

function skipReason(): string | undefined {
  if (Deno.uid() !== 0) return "needs root";
  try {
    Deno.statSync("/dev/fuse");
  } catch {
    return "needs /dev/fuse";
  }
  const rclone = new Deno.Command("sh", { args: ["-c", "command -v rclone"] }).outputSync();
  if (!rclone.success) return "needs rclone";
  return undefined;
}

const SKIP = skipReason();

const NS = "default";

function sc(name: string, parameters: Record<string, string>) {
  return {
    metadata: { name },
    provisioner: "s3.csi.scality.com",
    reclaimPolicy: "Delete",
    volumeBindingMode: "Immediate",
    mountOptions: ["allow-delete", "allow-overwrite"],
    parameters,
  };
}

function pvc(name: string, storageClassName: string): PersistentVolumeClaim {
  return {
    metadata: { name, namespace: NS },
    spec: {
      storageClassName,
      accessModes: ["ReadWriteMany"],
      resources: { requests: { storage: "1Gi" } },
    },
  };
}

testOrSkip(SKIP, {
  name: "sandbox: PVCs become PVs, a pod mounts and writes, deleting the PVCs applies the policy",
  sanitizeResources: false,
  sanitizeOps: false,
  async fn() {
    const dir = await Deno.makeTempDir({ prefix: "s3csi-prov-sandbox-" });
    await Deno.chmod(dir, 0o755);
    const stop = new AbortController();
    const out: string[] = [];
    const env = new SandboxEnv(
      { dir, nodes: 1, s3: "rgw", engine: "rclone", signal: stop.signal },
      new StepReporter((t) => out.push(t)),
    );
    let teardown = "";
    const shared = `shared-${unique()}`;
    try {
      assert.ok(await env.start(), out.join(""));
      const c = env.client!;
      assert.ok(
        env.provisioner,
        `no controller with a connected csi-provisioner:\n${out.join("")}`,
      );

      await env.s3Client!.send(
        new (await import("@aws-sdk/client-s3")).CreateBucketCommand({
          Bucket: shared,
        }),
      );
      await env.s3Client!.send(
        new PutObjectCommand({ Bucket: shared, Key: "neighbour/secret.txt", Body: "not yours" }),
      );
      await c.create(STORAGE_CLASSES, sc("s3-all", { deletePolicy: "delete-all" }) as never);
      await c.create(STORAGE_CLASSES, sc("s3-if-empty", {}) as never);
      await c.create(
        STORAGE_CLASSES,
        sc("s3-prefix", {
          mode: "prefix",
          bucketName: shared,
          deletePolicy: "delete-all",
        }) as never,
      );
      const claims = {
        all: await c.create(PVCS, pvc("vol-all", "s3-all")),
        ifEmpty: await c.create(PVCS, pvc("vol-if-empty", "s3-if-empty")),
        prefix: await c.create(PVCS, pvc("vol-prefix", "s3-prefix")),
      };
      for (const p of Object.values(claims)) {
        await waitFor(`PVC ${p.metadata.name} bound`, async () => {
          const got = await c.get<PersistentVolumeClaim>(PVCS, p.metadata.name!, NS);
          return got?.status?.phase === "Bound";
        }, { timeoutMs: 30_000, intervalMs: 200 });
      }
      const pvOf = async (p: PersistentVolumeClaim) =>
        (await c.get<PersistentVolume>(PVS, `pvc-${p.metadata.uid}`))!;
      const bucketAll = (await pvOf(claims.all)).spec.csi!.volumeAttributes!.bucketName!;
      const bucketIfEmpty = (await pvOf(claims.ifEmpty)).spec.csi!.volumeAttributes!.bucketName!;
      const prefix = (await pvOf(claims.prefix)).spec.csi!.volumeAttributes!.prefix!;

      await c.create<Pod>(PODS, {
        metadata: { name: "dyn-writer", namespace: NS },
        spec: {
          restartPolicy: "Never",
          terminationGracePeriodSeconds: 10,
          securityContext: { runAsUser: 1000, runAsGroup: 1000, fsGroup: 1000 },
          containers: [{
            name: "writer",
            image: "busybox",
            command: [
              "sh",
              "-c",
              "echo a > /a/f.txt && echo e > /e/f.txt && echo p > /p/f.txt && ls -A /p > /p/listing.txt",
            ],
            volumeMounts: [
              { name: "a", mountPath: "/a" },
              { name: "e", mountPath: "/e" },
              { name: "p", mountPath: "/p" },
            ],
          }],
          volumes: [
            { name: "a", persistentVolumeClaim: { claimName: "vol-all" } },
            { name: "e", persistentVolumeClaim: { claimName: "vol-if-empty" } },
            { name: "p", persistentVolumeClaim: { claimName: "vol-prefix" } },
          ],
        },
      } as unknown as Pod);
      await waitFor("the pod to succeed", async () => {
        const p = await c.get<Pod>(PODS, "dyn-writer", NS);
        if (p?.status?.phase === "Failed") {
          throw new Error(`pod failed: ${JSON.stringify(p.status)}`);
        }
        return p?.status?.phase === "Succeeded";
      }, { timeoutMs: 120_000, intervalMs: 300 });

      const get = async (Bucket: string, Key: string) =>
        (await (await env.s3Client!.send(new GetObjectCommand({ Bucket, Key }))).Body!
          .transformToString()).trim();
      assert.equal(await get(bucketAll, "f.txt"), "a");
      assert.equal(await get(bucketIfEmpty, "f.txt"), "e");
      assert.equal(await get(shared, `${prefix}f.txt`), "p");
      const listing = await get(shared, `${prefix}listing.txt`);
      assert.doesNotMatch(listing, /neighbour|secret/, "the pod sees only its prefix");
      assert.match(listing, /f\.txt/);

      await c.delete(PODS, "dyn-writer", NS);
      await waitFor("the pod to go", async () => !(await c.get(PODS, "dyn-writer", NS)), {
        timeoutMs: 60_000,
        intervalMs: 200,
      });
      for (const p of Object.values(claims)) await c.delete(PVCS, p.metadata.name!, NS);
      await waitFor(
        "delete-all PVs deleted",
        async () =>
          !(await c.get(PVS, `pvc-${claims.all.metadata.uid}`)) &&
          !(await c.get(PVS, `pvc-${claims.prefix.metadata.uid}`)),
        {
          timeoutMs: 60_000,
          intervalMs: 300,
        },
      );
      const left = await env.s3Client!.send(new ListObjectsV2Command({ Bucket: shared }));
      assert.deepEqual(left.Contents?.map((o) => o.Key), ["neighbour/secret.txt"]);
      await assert.rejects(get(bucketAll, "f.txt"), "delete-all removed the bucket");
      const event = await waitFor(
        "VolumeFailedDelete on the delete-if-empty PV",
        async () =>
          (await c.list<{ reason?: string; message?: string; involvedObject?: { name?: string } }>(
            EVENTS,
            { namespace: "default" },
          )).items.find((e) =>
            e.reason === "VolumeFailedDelete" &&
            e.involvedObject?.name === `pvc-${claims.ifEmpty.metadata.uid}`
          ),
        { timeoutMs: 30_000, intervalMs: 300 },
      );
      assert.match(event.message!, /not empty \(f\.txt\)/);
      assert.equal(await get(bucketIfEmpty, "f.txt"), "e", "delete-if-empty kept the data");
      writeStderr(`sandbox provisioning: ${event.message}\n`);
    } finally {
      await env.drain().catch(() => {});
      await env.stop().catch(() => {});
      stop.abort();
      // Fail on what the run left behind (after the test's own failure, if any, is reported).
      const problems = [await leftoversOf(dir)].filter(Boolean);
      const crashes = env.crashes();
      if (crashes.length) problems.push(`driver process crash(es):\n${describeCrashes(crashes)}`);
      await cleanUpLeftovers(dir);
      if (problems.length) writeStderr(`sandbox provisioning: state and logs kept in ${dir}\n`);
      else await Deno.remove(dir, { recursive: true }).catch(() => {});
      teardown = problems.join("\n");
    }
    assert.equal(teardown, "", "nothing left mounted or running, no driver process crashed");
  },
});
