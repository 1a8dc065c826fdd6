/**
 * The admission policies of volumes (`src/deploy/render_volume_policy.ts`), deployed with
 * `deno task deploy` to the real kube-apiserver tier, answer every case of `_volume_cases.ts`
 * exactly as the driver would: an accepted case is admitted, a refused one is refused with the
 * message the node plugin's `validatePublish()` (or the provisioner's `parseParameters()`) gives
 * for the same object — computed in this test by calling them. Cases are server-side dry runs
 * (admission runs on them, nothing is stored); `kubectl apply` is shown once, and the UPDATE rules
 * (only a changed CSI source or mount options is judged) on a real PersistentVolume.
 *
 * Skips (printed) without `KUBE_REAL_KUBECONFIG`: the API emulator runs no admission policies.
 *
 * @module
 */
import assert from "node:assert/strict";
import { ApiError } from "../../src/kube/errors.ts";
import { PVS } from "../../src/kube/resources.ts";
import type { KubeObject } from "../../src/kube/client.ts";
import { STORAGE_CLASS_POLICY, VOLUME_POLICY } from "../../src/deploy/names.ts";
import {
  kubectl,
  kubectlSkipReason,
  realTierSkipReason,
  testOrSkip,
  waitFor,
} from "../_helpers.ts";
import { KubeHttp, loadTarget } from "../testbed/harness/kube_http.ts";
import { deployCluster, runTask } from "./_deploy_cluster.ts";
import {
  driverMessage,
  nodeMessage,
  storageClassCases,
  type VolumeCase,
  volumeCases,
} from "./_volume_cases.ts";

const PATHS = {
  PersistentVolume: "/api/v1/persistentvolumes",
  StorageClass: "/apis/storage.k8s.io/v1/storageclasses",
} as const;

/** The policy's message in an API error text ("... denied request: <message>"), or undefined. */
function deniedMessage(text: string): string | undefined {
  const at = text.indexOf("denied request: ");
  return at < 0 ? undefined : text.slice(at + "denied request: ".length);
}

async function dryRun(http: KubeHttp, c: VolumeCase, name: string) {
  const r = await http.request("POST", `${PATHS[c.kind]}?dryRun=All`, {
    body: { ...c.object, metadata: { name } },
  });
  return { status: r.status, message: r.body?.message as string | undefined };
}

testOrSkip(realTierSkipReason(), {
  name:
    "volume admission (real kube-apiserver): every allow-list rule is admitted or refused with the driver's own message",
  async fn(t) {
    await using c = await deployCluster("real");
    const up = await runTask("deploy", c.kubeconfig, ["--set", c.set, "--no-wait"]);
    assert.equal(up.code, 0, up.stderr);
    const http = new KubeHttp(await loadTarget("admin", c.kubeconfig));
    try {
      const probe = volumeCases().find((x) => !x.accepted)!;
      await waitFor("the volume admission policies to be in force", async () => {
        const r = await dryRun(http, probe, "policy-probe");
        return r.status === 422 && deniedMessage(r.message ?? "") !== undefined;
      }, { timeoutMs: 30_000, intervalMs: 200 });
      const storageProbe = storageClassCases().find((x) => !x.accepted)!;
      await waitFor("the StorageClass policy to be in force", async () => {
        const r = await dryRun(http, storageProbe, "policy-probe");
        return r.status === 422;
      }, { timeoutMs: 30_000, intervalMs: 200 });

      let accepted = 0;
      let refused = 0;
      for (
        const [kind, cases] of [["PersistentVolume", volumeCases()], [
          "StorageClass",
          storageClassCases(),
        ]] as const
      ) {
        await t.step(`${kind}: ${cases.length} cases`, async () => {
          for (const [i, vc] of cases.entries()) {
            const name = `case-${i}`;
            const want = driverMessage(vc, name);
            assert.equal(
              want === undefined,
              vc.accepted,
              `${vc.name}: the driver says ${want ?? "yes"}`,
            );
            const got = await dryRun(http, vc, name);
            if (want === undefined) {
              assert.equal(got.status, 201, `${vc.name}: ${got.status} ${got.message}`);
              accepted++;
            } else {
              assert.equal(got.status, 422, `${vc.name}: ${got.status} ${got.message}`);
              assert.equal(deniedMessage(got.message ?? ""), want, vc.name);
              assert.match(
                got.message!,
                new RegExp(
                  `ValidatingAdmissionPolicy '(${VOLUME_POLICY}|${STORAGE_CLASS_POLICY})'`,
                ),
              );
              refused++;
            }
          }
        });
      }
      assert.ok(accepted > 50 && refused > 150, `${accepted} accepted, ${refused} refused`);
    } finally {
      http.close();
    }
  },
});

testOrSkip(realTierSkipReason() ?? kubectlSkipReason(), {
  name:
    "volume admission (real kube-apiserver): kubectl apply shows the node's message; updates are judged only when the source or options change",
  async fn() {
    await using c = await deployCluster("real");
    const up = await runTask("deploy", c.kubeconfig, ["--set", c.set, "--no-wait"]);
    assert.equal(up.code, 0, up.stderr);
    const name = `vap-pv-${crypto.randomUUID().slice(0, 6)}`;
    const pv = (mountOptions: string[]) => ({
      apiVersion: "v1",
      kind: "PersistentVolume",
      metadata: { name },
      spec: {
        capacity: { storage: "1Gi" },
        accessModes: ["ReadWriteMany"],
        persistentVolumeReclaimPolicy: "Retain",
        mountOptions,
        csi: {
          driver: "s3.csi.scality.com",
          volumeHandle: name,
          volumeAttributes: { bucketName: "bucket-1" },
        },
      },
    });
    const bad = pv(["allow-delete", "uid=0"]);
    const want = nodeMessage(bad, name);
    assert.ok(want?.includes('"uid=0" is invalid'), String(want));
    await waitFor("the policy to be in force", async () => {
      const r = await kubectl(c.kubeconfig, ["apply", "--dry-run=server", "-f", "-"], {
        stdin: JSON.stringify(bad),
      });
      return r.code !== 0 && r.stderr.includes("denied request");
    }, { timeoutMs: 30_000, intervalMs: 300 });
    const applied = await kubectl(c.kubeconfig, ["apply", "-f", "-"], {
      stdin: JSON.stringify(bad),
    });
    assert.notEqual(applied.code, 0);
    assert.ok(applied.stderr.trim().endsWith(`denied request: ${want}`), applied.stderr);

    const good = await kubectl(c.kubeconfig, ["apply", "-f", "-"], {
      stdin: JSON.stringify(pv(["allow-delete", "-f"])),
    });
    assert.equal(good.code, 0, good.stderr);
    try {
      // A change of the mount options is judged; one of labels is not.
      const refused = await c.client.patch(PVS, name, undefined, {
        spec: { mountOptions: ["allow-delete", "endpoint-url=http://x"] },
      }, { type: "merge" }).then(() => undefined, (e: unknown) => e);
      assert.ok(refused instanceof ApiError && refused.status === 422, String(refused));
      assert.equal(
        deniedMessage(refused.message),
        nodeMessage(pv(["allow-delete", "endpoint-url=http://x"]), name),
      );
      const labelled = await c.client.patch<KubeObject>(PVS, name, undefined, {
        metadata: { labels: { team: "a" } },
      }, { type: "merge" });
      assert.equal(labelled.metadata?.labels?.team, "a");
    } finally {
      await c.client.delete(PVS, name).catch(() => {});
    }
  },
});
