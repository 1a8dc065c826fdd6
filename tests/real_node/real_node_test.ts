/**
 * The real-node tier (`tests/real_node/README.md`): the driver deployed by `deno task deploy` onto a
 * real kubelet + containerd node, the shared e2e scenarios on it, the scenarios only a real node
 * shows, then `deno task undeploy` and a stop that must leave nothing on the host. One cluster for
 * the whole file; the tests run in the order declared here.
 */
import assert from "node:assert/strict";
import type { KubeObject } from "../../src/kube/client.ts";
import {
  CLUSTER_ROLES,
  CRDS,
  CSI_DRIVERS,
  CSI_NODES,
  DAEMONSETS,
  DEPLOYMENTS,
  LEASES,
  NAMESPACES,
  PODS,
  PRIORITY_CLASSES,
  VALIDATING_ADMISSION_POLICIES,
  VALIDATING_ADMISSION_POLICY_BINDINGS,
} from "../../src/kube/resources.ts";
import { CONTROLLER_CONTAINERS } from "../../src/deploy/render_controller.ts";
import { PROVISIONER_CONTAINERS } from "../../src/deploy/render_provisioner.ts";
import { NODE_CONTAINERS } from "../../src/deploy/render_node.ts";
import {
  CONTROLLER_DEPLOYMENT,
  CONTROLLER_POLICY,
  LABEL_PART_OF,
  MOUNTPOINT_POD_POLICY,
  NODE_DAEMONSET,
  NODE_POLICY,
  PART_OF,
  PRIORITY_CLASS_POLICY,
  PROVISIONER_DEPLOYMENT,
  PROVISIONER_LEASE,
  STORAGE_CLASS_POLICY,
  VOLUME_POLICY,
} from "../../src/deploy/names.ts";
import { defaultValues } from "../../src/deploy/values.ts";
import { DEFAULT_MOUNTPOINT_NAMESPACE } from "../../src/mppod/labels.ts";
import { DRIVER_NAME } from "../../src/util/version.ts";
import type { Pod } from "../testbed/kubelet/k8s_types.ts";
import { waitFor } from "../_helpers.ts";
import { stepsOf } from "../scenarios/cluster.ts";
import { STATIC_PROVISIONING } from "../scenarios/static_provisioning.ts";
import { DYNAMIC_PROVISIONING } from "../scenarios/dynamic_provisioning.ts";
import { SHARING } from "../scenarios/sharing.ts";
import { FS_GROUP } from "../scenarios/fs_group.ts";
import { READ_ONLY } from "../scenarios/read_only.ts";
import { MULTI_VOLUME } from "../scenarios/multi_volume.ts";
import { SECRETS_PER_VOLUME } from "../scenarios/secrets.ts";
import { INLINE_VOLUMES } from "../scenarios/inline_volumes.ts";
import { failuresScenario } from "../scenarios/failures.ts";
import { TEARDOWN } from "../scenarios/teardown.ts";
import { NO_EXECUTE_TAINT } from "../scenarios/taints.ts";
import { HEADROOM } from "../scenarios/headroom.ts";
import { DRAIN } from "../scenarios/drain.ts";
import { ENGINE_CRASH } from "../scenarios/engine_crash.ts";
import { UPGRADE } from "../scenarios/upgrade.ts";
import {
  deployed,
  DRIVER_NAMESPACE,
  markUndeployed,
  realNodeFinalTest,
  realNodeLeftovers,
  realNodeScenario,
  realNodeTest,
  report,
  stopTier,
  tier,
  TIMINGS,
} from "./_harness.ts";
import {
  controllerCrash,
  kubeletAndPluginCrash,
  mountpointIdentity,
  nodePluginCrash,
} from "./_node_only.ts";
import { engineCache } from "./_cache.ts";
import { perVolumeEndpoint } from "./_endpoints.ts";

interface CsiDriverLike extends KubeObject {
  spec?: { attachRequired?: boolean; fsGroupPolicy?: string; requiresRepublish?: boolean };
}
interface WorkloadLike extends KubeObject {
  status?: { numberReady?: number; readyReplicas?: number; desiredNumberScheduled?: number };
}

realNodeTest(
  "real node: deno task deploy rolls out the driver; pods reach S3",
  async ({ cluster: e, node, podEndpoint, driver }, t) => {
    await t.step("CSIDriver, DaemonSet and Deployments as rendered, all Ready", async () => {
      assert.match(driver.summary, /Deployed s3\.csi\.scality\.com/);
      const csiDriver = await e.client.get<CsiDriverLike>(CSI_DRIVERS, DRIVER_NAME);
      assert.equal(csiDriver?.spec?.attachRequired, false);
      assert.equal(csiDriver?.spec?.fsGroupPolicy, "File");
      assert.equal(csiDriver?.spec?.requiresRepublish, true);
      const ds = await e.client.get<WorkloadLike>(DAEMONSETS, NODE_DAEMONSET, DRIVER_NAMESPACE);
      assert.equal(ds?.status?.numberReady, 1, "DaemonSet: 1/1 ready");
      const dep = await e.client.get<WorkloadLike>(
        DEPLOYMENTS,
        CONTROLLER_DEPLOYMENT,
        DRIVER_NAMESPACE,
      );
      assert.equal(dep?.status?.readyReplicas, 1, "controller Deployment: 1/1 ready");
      const prov = await e.client.get<WorkloadLike>(
        DEPLOYMENTS,
        PROVISIONER_DEPLOYMENT,
        DRIVER_NAMESPACE,
      );
      assert.equal(prov?.status?.readyReplicas, 1, "provisioning Deployment: 1/1 ready");
      const nodePod = (await e.nodePluginPod())!;
      assert.deepEqual(
        nodePod.status?.containerStatuses?.map((c) => `${c.name} ${c.ready}`).sort(),
        Object.values(NODE_CONTAINERS).map((n) => `${n} true`).sort(),
        "node plugin, registrar and livenessprobe ready",
      );
      const ctrlPod = (await e.client.list<Pod>(PODS, {
        namespace: DRIVER_NAMESPACE,
        labelSelector: `app=${CONTROLLER_DEPLOYMENT}`,
      })).items[0]!;
      assert.deepEqual(
        ctrlPod.status?.containerStatuses?.map((c) => `${c.name} ${c.ready}`).sort(),
        Object.values(CONTROLLER_CONTAINERS).map((n) => `${n} true`).sort(),
        "controller ready",
      );
      const provPod = (await e.client.list<Pod>(PODS, {
        namespace: DRIVER_NAMESPACE,
        labelSelector: `app=${PROVISIONER_DEPLOYMENT}`,
      })).items[0]!;
      assert.deepEqual(
        provPod.status?.containerStatuses?.map((c) => `${c.name} ${c.ready}`).sort(),
        Object.values(PROVISIONER_CONTAINERS).map((n) => `${n} true`).sort(),
        "CSI Controller service and csi-provisioner ready",
      );
      for (const p of [nodePod, ctrlPod, provPod]) {
        for (const c of p.status?.containerStatuses ?? []) {
          assert.match(c.image, /^localhost\//, `${c.name} runs a locally built image`);
        }
      }
    });
    await t.step(
      "the node's Node patch, Mountpoint Pods and the controller's pod patch are under the rendered admission policies",
      async () => {
        const policies = (await e.client.list(VALIDATING_ADMISSION_POLICIES, {
          labelSelector: `${LABEL_PART_OF}=${PART_OF}`,
        })).items.map((x) => x.metadata?.name).sort();
        const rendered = [
          NODE_POLICY,
          MOUNTPOINT_POD_POLICY,
          PRIORITY_CLASS_POLICY,
          CONTROLLER_POLICY,
          VOLUME_POLICY,
          STORAGE_CLASS_POLICY,
        ].sort();
        assert.deepEqual(policies, rendered, "the policies are served by the real apiserver");
        const bindings = (await e.client.list(VALIDATING_ADMISSION_POLICY_BINDINGS, {
          labelSelector: `${LABEL_PART_OF}=${PART_OF}`,
        })).items;
        assert.equal(bindings.length, rendered.length, "and bound");
      },
    );
    await t.step("registrar: CSINode lists the driver; provisioner holds its Lease", async () => {
      // Ready containers do not mean these happened yet: the registrar registers with the kubelet
      // and the csi-provisioner runs for the Lease after their probes pass.
      await waitFor("CSINode lists the driver", async () => {
        const csiNode = await e.client.get<
          { spec?: { drivers?: { name: string }[] } } & KubeObject
        >(
          CSI_NODES,
          node.nodeName,
        );
        return csiNode?.spec?.drivers?.some((d) => d.name === DRIVER_NAME) ?? false;
      }, { timeoutMs: 60_000, intervalMs: 250 });
      await waitFor("the csi-provisioner holds its Lease", async () => {
        const lease = await e.client.get<{ spec?: { holderIdentity?: string } } & KubeObject>(
          LEASES,
          PROVISIONER_LEASE,
          DRIVER_NAMESPACE,
        );
        return Boolean(lease?.spec?.holderIdentity);
      }, { timeoutMs: 60_000, intervalMs: 250 });
    });
    await t.step("livenessprobe answers /healthz from the node plugin (CSI Probe)", async () => {
      const pod = (await e.nodePluginPod())!;
      const port = defaultValues().node.healthPort;
      const r = await fetch(`http://${pod.status!.podIP}:${port}/healthz`);
      assert.equal(r.status, 200, await r.text());
    });
    await t.step(`a pod reaches S3 at ${podEndpoint}`, async () => {
      const url = new URL(podEndpoint);
      const out = await e.run({
        name: "s3-reach",
        volumes: [],
        script:
          `printf 'GET / HTTP/1.0\\r\\nHost: ${url.host}\\r\\n\\r\\n' | nc ${url.hostname} ${url.port} | head -1`,
      });
      assert.match(out, /^HTTP\/1\.[01] \d{3}/, `answer: ${JSON.stringify(out)}`);
    });
  },
);

for (
  const s of [
    STATIC_PROVISIONING,
    DYNAMIC_PROVISIONING,
    SHARING,
    FS_GROUP,
    READ_ONLY,
    MULTI_VOLUME,
    SECRETS_PER_VOLUME,
    INLINE_VOLUMES,
    failuresScenario(),
    TEARDOWN,
  ]
) realNodeScenario(s);

realNodeTest(
  "real node: per-volume endpoints: two S3 servers at once",
  (tier, t) => perVolumeEndpoint(tier, stepsOf(t)),
);
realNodeTest(
  "real node: the Mountpoint container runs as uid 1000 without capabilities",
  (tier, t) => mountpointIdentity(tier, stepsOf(t)),
);
realNodeTest(
  "real node: engine cache on an emptyDir and on a generic ephemeral volume",
  (tier, t) => engineCache(tier, stepsOf(t)),
);
realNodeTest(
  "real node: node plugin container killed while a workload uses its mount",
  (tier, t) => nodePluginCrash(tier, stepsOf(t)),
);
realNodeScenario(ENGINE_CRASH);
realNodeTest(
  "real node: controller killed mid-reconcile creates no duplicate",
  (tier, t) => controllerCrash(tier, stepsOf(t)),
);
realNodeTest(
  "real node: kubelet and node plugin restarted together clean stale mounts",
  (tier, t) => kubeletAndPluginCrash(tier, stepsOf(t)),
);

// Day 2 (issue 22), last: headroom fills the first node (and frees it again); taints and drain
// need the second node, which stays until the tier stops.
for (const s of [UPGRADE, HEADROOM, NO_EXECUTE_TAINT, DRAIN]) realNodeScenario(s);

realNodeFinalTest("real node: deno task undeploy removes everything", async (t) => {
  const driver = deployed();
  const e = await tier().catch(() => undefined).then((x) => x?.cluster);
  assert.ok(driver && e, "the driver was never deployed (see the first test)");
  await t.step("leftover workloads of failed tests deleted first", async () => {
    const left = (await e.client.list<Pod>(PODS, { namespace: e.ns })).items;
    for (const p of left) await e.deletePod(p.metadata.name).catch(() => {});
    await e.waitReleased(60_000);
    if (left.length) report(`undeploy: ${left.length} leftover workload(s) deleted first`);
  });
  await t.step("deno task undeploy --purge", async () => {
    await driver.undeploy();
    markUndeployed();
  });
  await t.step("no driver object, pod, registration, mount or credential left", async () => {
    const c = e.client;
    assert.equal(await c.get(CSI_DRIVERS, DRIVER_NAME), undefined, "CSIDriver");
    assert.equal(await c.get(DAEMONSETS, NODE_DAEMONSET, DRIVER_NAMESPACE), undefined);
    assert.equal(await c.get(DEPLOYMENTS, CONTROLLER_DEPLOYMENT, DRIVER_NAMESPACE), undefined);
    assert.equal(await c.get(DEPLOYMENTS, PROVISIONER_DEPLOYMENT, DRIVER_NAMESPACE), undefined);
    assert.equal(await c.get(NAMESPACES, DEFAULT_MOUNTPOINT_NAMESPACE), undefined, "mount-s3");
    assert.deepEqual(
      (await c.list(CRDS)).items.filter((x) => x.metadata?.name?.endsWith(".s3.csi.scality.com"))
        .map((x) => x.metadata?.name),
      [],
      "CRD",
    );
    for (
      const r of [
        PRIORITY_CLASSES,
        CLUSTER_ROLES,
        VALIDATING_ADMISSION_POLICIES,
        VALIDATING_ADMISSION_POLICY_BINDINGS,
      ]
    ) {
      assert.deepEqual(
        (await c.list(r, { labelSelector: `${LABEL_PART_OF}=${PART_OF}` })).items.map((x) =>
          x.metadata?.name
        ),
        [],
        r.plural,
      );
    }
    await waitFor(
      "the driver pods gone",
      async () => !(await c.list(PODS, { namespace: DRIVER_NAMESPACE })).items.length,
      {
        timeoutMs: 60_000,
        intervalMs: 250,
      },
    );
    await waitFor("CSINode without the driver", async () => {
      const n = await c.get<{ spec?: { drivers?: { name: string }[] | null } } & KubeObject>(
        CSI_NODES,
        e.node.nodeName,
      );
      return !n?.spec?.drivers?.some((d) => d.name === DRIVER_NAME);
    }, { timeoutMs: 30_000, intervalMs: 250 });
    assert.deepEqual(await e.fuseMounts(), [], "no FUSE mount");
    assert.deepEqual(await e.credentialFiles(), [], "no credential file");
    assert.deepEqual(await e.engineProcesses([]), [], "no process of any pod");
    await c.delete(NAMESPACES, e.ns).catch(() => false);
  });
});

realNodeFinalTest("real node: stop leaves nothing on the host (check_clean)", async () => {
  const problems = await stopTier();
  const left = await realNodeLeftovers();
  const lines = [...TIMINGS].map(([k, ms]) => `  ${(ms / 1000).toFixed(1).padStart(6)} s  ${k}`);
  report(`timings:\n${lines.join("\n")}`);
  assert.deepEqual(problems, [], "stop");
  assert.deepEqual(left, [], "check_clean.sh finds nothing left");
});
