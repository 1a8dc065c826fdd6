/**
 * The rendered RBAC and node admission policy, deployed with `deno task deploy` to the real
 * kube-apiserver tier (RBAC authorizer, ValidatingAdmissionPolicy admission), so the answers are
 * the real server's, not a reading of our own tables:
 *
 * 1. SubjectAccessReviews for each component's ServiceAccount: every call its code makes (node,
 *    controller: scanned from the source) or its documented minimum (csi-provisioner) is allowed
 *    where it is made, and the neighbouring calls it must not make are refused — in particular
 *    the controller (reconciler) cannot read Secrets or write PersistentVolumes, and the
 *    csi-provisioner cannot touch pods, nodes or attachments.
 * 2. The node plugin's Node patch, with a real bound token of a pod on node A (TokenRequest): it
 *    removes the agent-not-ready taint from node A through the node plugin's own code, and the
 *    admission policy refuses everything else — node B, other taints, labels, cordoning.
 * 3. The Mountpoint admission policies: in the Mountpoint namespace only the controller's token
 *    creates a pod (another identity with RBAC to do it, and the cluster admin, are refused with the
 *    policy's message), nobody else changes a pod's image or adds an ephemeral container
 *    (annotations stay open); a pod of another namespace naming the Mountpoint PriorityClass is
 *    refused.
 * 4. The controller's pod patch (headroom), with a token of its ServiceAccount: the patch headroom
 *    makes (pin, remove the gate) passes; labels, other gates, tolerations are refused.
 *
 * Skips (printed) without `KUBE_REAL_KUBECONFIG`: the API emulator neither authorizes nor admits.
 *
 * @module
 */
import assert from "node:assert/strict";
import { GROUP } from "../../src/api/group_version.ts";
import { S3PA_PLURAL } from "../../src/api/mountpoint_s3_pod_attachment.ts";
import {
  CONTROLLER_SERVICE_ACCOUNT,
  MOUNTPOINT_POD_POLICY,
  NODE_SERVICE_ACCOUNT,
  PRIORITY_CLASS_POLICY,
  PROVISIONER_SERVICE_ACCOUNT,
} from "../../src/deploy/names.ts";
import { PROVISIONER_PERMISSIONS } from "../../src/deploy/render_rbac.ts";
import type { KubeClient, KubeObject } from "../../src/kube/client.ts";
import { ApiError } from "../../src/kube/errors.ts";
import { kubeConfigFromFile } from "../../src/kube/kube_config.ts";
import {
  NAMESPACES,
  NODES,
  PODS,
  type Resource,
  ROLE_BINDINGS,
  ROLES,
  SERVICE_ACCOUNTS,
  VALIDATING_ADMISSION_POLICIES,
} from "../../src/kube/resources.ts";
import { RestKubeClient } from "../../src/kube/rest_client.ts";
import type { Node, Pod } from "../../src/kube/types.ts";
import { GATE_RESERVE_HEADROOM, TAINT_AGENT_NOT_READY } from "../../src/mppod/labels.ts";
import { pinToNodePatch } from "../../src/controller/headroom_pods.ts";
import { removeAgentNotReadyTaint } from "../../src/node/taint.ts";
import { waitFor } from "../_helpers.ts";
import { KubeHttp, loadTarget } from "../testbed/harness/kube_http.ts";
import { mountpointPod } from "../../src/mppod/pod_spec.ts";
import { type DeployCluster, deployCluster, runTask } from "./_deploy_cluster.ts";
import { scanApiCalls } from "./_api_calls.ts";
import { realTierSkipReason, testOrSkip } from "../_helpers.ts";

const SAR: Resource = {
  group: "authorization.k8s.io",
  version: "v1",
  plural: "subjectaccessreviews",
  kind: "SubjectAccessReview",
  namespaced: false,
};

interface Ask {
  verb: string;
  group: string;
  resource: string;
  namespace?: string;
  name?: string;
}

function reviewer(client: KubeClient, ns: string) {
  return async (sa: string, a: Ask): Promise<boolean> => {
    const [res, sub] = a.resource.split("/");
    const review = await client.create<KubeObject & { status?: { allowed?: boolean } }>(SAR, {
      spec: {
        user: `system:serviceaccount:${ns}:${sa}`,
        groups: ["system:serviceaccounts", `system:serviceaccounts:${ns}`, "system:authenticated"],
        resourceAttributes: {
          verb: a.verb,
          group: a.group,
          resource: res,
          ...(sub ? { subresource: sub } : {}),
          ...(a.namespace ? { namespace: a.namespace } : {}),
          ...(a.name ? { name: a.name } : {}),
        },
      },
    });
    return review.status?.allowed === true;
  };
}

testOrSkip(realTierSkipReason(), {
  name:
    "rbac (real kube-apiserver): each identity may make its calls and nothing next to them (SubjectAccessReview)",
  async fn() {
    await using c = await deployCluster("real");
    const ns = await deployDriver(c);
    const mpNs = c.objects.find((o) =>
      o.kind === "Namespace" && o.metadata.name.endsWith("-mp")
    )!.metadata.name;
    const allowed = reviewer(c.client, ns);
    // Where each component makes its namespaced calls (the scan gives verbs, not namespaces).
    const where = (component: string, resource: string, verb: string): string | undefined => {
      if (resource === "pods") {
        return component === "node" || !["list", "watch"].includes(verb) ? mpNs : undefined;
      }
      if (resource === "leases") return ns;
      if (resource === "events") return "default"; // events on workload pods, any namespace
      return undefined;
    };
    for (
      const [component, sa, entry] of [
        ["node", NODE_SERVICE_ACCOUNT, "src/cmd/node/main.ts"],
        ["controller", CONTROLLER_SERVICE_ACCOUNT, "src/cmd/controller/main.ts"],
      ] as const
    ) {
      const scan = await scanApiCalls(entry);
      for (const call of scan.calls) {
        const a: Ask = { verb: call.verb, group: call.group, resource: call.resource };
        const n = where(component, call.resource, call.verb);
        if (n) a.namespace = n;
        if (call.resource === "leases" && call.verb !== "create") a.name = "s3-csi-controller";
        assert.ok(await allowed(sa, a), `${component} may not ${JSON.stringify(a)} (${call.at})`);
      }
    }
    for (const p of PROVISIONER_PERMISSIONS) {
      for (const verb of p.verbs) {
        const a: Ask = { verb, group: p.group, resource: p.resource };
        if (p.scope === "driver-namespace") a.namespace = ns;
        if (p.resource === "secrets") a.namespace = "default"; // StorageClass secrets: anywhere
        assert.ok(
          await allowed(PROVISIONER_SERVICE_ACCOUNT, a),
          `csi-provisioner may not ${JSON.stringify(a)}`,
        );
      }
    }
    const core = (verb: string, resource: string, namespace?: string): Ask => ({
      verb,
      group: "",
      resource,
      ...(namespace ? { namespace } : {}),
    });
    const refused: [string, Ask][] = [
      // The node plugin: no pod writes, no other namespaces, no attachment writes, no secrets.
      [NODE_SERVICE_ACCOUNT, core("create", "pods", mpNs)],
      [NODE_SERVICE_ACCOUNT, core("list", "pods", "default")],
      [NODE_SERVICE_ACCOUNT, { verb: "update", group: GROUP, resource: S3PA_PLURAL }],
      [NODE_SERVICE_ACCOUNT, core("get", "secrets", ns)],
      [NODE_SERVICE_ACCOUNT, core("delete", "nodes")],
      [NODE_SERVICE_ACCOUNT, core("update", "nodes")],
      [NODE_SERVICE_ACCOUNT, core("patch", "nodes/status")],
      // The controller (reconciler): no Secrets at all, no PersistentVolume writes, pods only in
      // the Mountpoint namespace, its own Lease only.
      [CONTROLLER_SERVICE_ACCOUNT, core("get", "secrets", "default")],
      [CONTROLLER_SERVICE_ACCOUNT, core("get", "secrets", ns)],
      [CONTROLLER_SERVICE_ACCOUNT, core("list", "secrets")],
      [CONTROLLER_SERVICE_ACCOUNT, core("watch", "secrets")],
      ...["create", "update", "patch", "delete"].map((
        verb,
      ): [string, Ask] => [CONTROLLER_SERVICE_ACCOUNT, core(verb, "persistentvolumes")]),
      [CONTROLLER_SERVICE_ACCOUNT, core("update", "persistentvolumeclaims", "default")],
      [CONTROLLER_SERVICE_ACCOUNT, core("create", "pods", "default")],
      [CONTROLLER_SERVICE_ACCOUNT, core("update", "pods", mpNs)],
      [CONTROLLER_SERVICE_ACCOUNT, core("patch", "nodes")],
      [CONTROLLER_SERVICE_ACCOUNT, {
        verb: "update",
        group: "coordination.k8s.io",
        resource: "leases",
        namespace: ns,
        name: "s3-csi-scality-com",
      }],
      [CONTROLLER_SERVICE_ACCOUNT, {
        verb: "update",
        group: "coordination.k8s.io",
        resource: "leases",
        namespace: "default",
        name: "s3-csi-controller",
      }],
      [CONTROLLER_SERVICE_ACCOUNT, {
        verb: "delete",
        group: "apiextensions.k8s.io",
        resource: "customresourcedefinitions",
      }],
      // The csi-provisioner: nothing of the reconciler's or the node's.
      [PROVISIONER_SERVICE_ACCOUNT, core("create", "pods", mpNs)],
      [PROVISIONER_SERVICE_ACCOUNT, core("list", "pods")],
      [PROVISIONER_SERVICE_ACCOUNT, core("patch", "nodes")],
      [PROVISIONER_SERVICE_ACCOUNT, core("list", "secrets")],
      [PROVISIONER_SERVICE_ACCOUNT, { verb: "create", group: GROUP, resource: S3PA_PLURAL }],
      [PROVISIONER_SERVICE_ACCOUNT, { verb: "list", group: GROUP, resource: S3PA_PLURAL }],
      [PROVISIONER_SERVICE_ACCOUNT, {
        verb: "update",
        group: "coordination.k8s.io",
        resource: "leases",
        namespace: "default",
      }],
    ];
    for (const [sa, a] of refused) {
      assert.equal(await allowed(sa, a), false, `${sa} may ${JSON.stringify(a)}`);
    }
  },
});

testOrSkip(realTierSkipReason(), {
  name:
    "rbac (real kube-apiserver): the node plugin's token patches only its own Node, only to remove the agent-not-ready taint",
  async fn() {
    await using c = await deployCluster("real");
    const ns = await deployDriver(c);
    const s = crypto.randomUUID().slice(0, 6);
    const [nodeA, nodeB] = [`vap-a-${s}`, `vap-b-${s}`];
    const taints = [
      { key: TAINT_AGENT_NOT_READY, effect: "NoSchedule" },
      { key: "example.com/other", value: "x", effect: "NoSchedule" },
    ];
    for (const n of [nodeA, nodeB]) {
      await c.client.create<Node>(NODES, {
        metadata: { name: n, labels: { "kubernetes.io/hostname": n } },
        spec: { taints },
      });
    }
    let tokenClient: RestKubeClient | undefined;
    try {
      // A pod of the node plugin's ServiceAccount on node A, and a token bound to it, as kubelet
      // would project into the node plugin's container.
      await waitFor(
        `ServiceAccount ${NODE_SERVICE_ACCOUNT}`,
        () => c.client.get(SERVICE_ACCOUNTS, NODE_SERVICE_ACCOUNT, ns),
        { timeoutMs: 30_000, intervalMs: 200 },
      );
      const pod = await c.client.create<Pod>(PODS, {
        metadata: { name: `node-plugin-${s}`, namespace: ns },
        spec: {
          nodeName: nodeA,
          serviceAccountName: NODE_SERVICE_ACCOUNT,
          containers: [{ name: "x", image: "busybox" }],
        },
      });
      const token = await tokenOf(c.client, ns, NODE_SERVICE_ACCOUNT, pod);
      const server = kubeConfigFromFile(c.kubeconfig).server;
      tokenClient = new RestKubeClient({ server, insecureSkipTLSVerify: true, token });
      // The policy is loaded by the API server a moment after it is created (it was just
      // deployed): wait until a dry run of a refused patch is refused (admission runs on dry runs).
      const raw = new KubeHttp({
        name: "node",
        server,
        insecure: true,
        token,
      });
      try {
        await waitFor("the admission policy to be in force", async () => {
          const r = await raw.request("PATCH", `/api/v1/nodes/${nodeB}?dryRun=All`, {
            body: { metadata: { annotations: { probe: "x" } } },
            contentType: "application/merge-patch+json",
          });
          return r.status === 403;
        }, { timeoutMs: 30_000, intervalMs: 200 });
      } finally {
        raw.close();
      }
      // The node plugin's own code removes the taint from its node.
      assert.equal(
        await removeAgentNotReadyTaint(tokenClient, nodeA, { attempts: 1 }),
        "removed",
      );
      const a = await c.client.get<Node>(NODES, nodeA);
      // (the API server's own admission adds node.kubernetes.io/not-ready to new Nodes)
      const keys = (n?: Node) => n?.spec?.taints?.map((t) => t.key) ?? [];
      assert.ok(!keys(a).includes(TAINT_AGENT_NOT_READY), "the startup taint is gone");
      assert.ok(keys(a).includes("example.com/other"), "other taints stay");
      // Everything else is refused by the admission policy (RBAC alone would allow it).
      const refusedPatch = async (
        what: string,
        node: string,
        patch: unknown,
        type: "json" | "merge",
      ) => {
        const err = await tokenClient!.patch(NODES, node, undefined, patch, { type }).then(
          () => undefined,
          (e: unknown) => e,
        );
        assert.ok(err instanceof ApiError && err.status === 403, `${what} was not refused: ${err}`);
        assert.match(err.message, /S3 CSI node plugin/, what);
      };
      await refusedPatch("removing the taint from another node", nodeB, [
        { op: "test", path: "/spec/taints/0/key", value: TAINT_AGENT_NOT_READY },
        { op: "remove", path: "/spec/taints/0" },
      ], "json");
      await refusedPatch("removing another taint", nodeA, [
        { op: "remove", path: "/spec/taints/0" },
      ], "json");
      await refusedPatch("adding a taint", nodeA, [
        { op: "add", path: "/spec/taints/-", value: { key: "evil", effect: "NoExecute" } },
      ], "json");
      await refusedPatch("labelling its node", nodeA, {
        metadata: { labels: { "node-role.kubernetes.io/control-plane": "" } },
      }, "merge");
      await refusedPatch("cordoning its node", nodeA, { spec: { unschedulable: true } }, "merge");
      await refusedPatch("annotating another node", nodeB, {
        metadata: { annotations: { x: "y" } },
      }, "merge");
      const b = await c.client.get<Node>(NODES, nodeB);
      assert.ok(keys(b).includes(TAINT_AGENT_NOT_READY), "node B keeps its taint");
      assert.equal(b?.metadata.annotations?.x, undefined, "node B not annotated");
      const after = await c.client.get<Node>(NODES, nodeA);
      assert.deepEqual(keys(after), keys(a), "node A's taints unchanged by the refused patches");
      assert.equal(after?.spec?.unschedulable, undefined);
    } finally {
      await tokenClient?.close();
      for (const n of [nodeA, nodeB]) await c.client.delete(NODES, n).catch(() => {});
    }
  },
});

/** `deno task deploy` of the cluster's values (not waiting); the driver's namespace. */
async function deployDriver(c: DeployCluster): Promise<string> {
  const up = await runTask("deploy", c.kubeconfig, ["--set", c.set, "--no-wait"]);
  assert.equal(up.code, 0, up.stderr);
  return c.objects.find((o) => o.kind === "ServiceAccount")!.metadata.namespace!;
}

/**
 * A token of ServiceAccount `ns/sa` (TokenRequest), as its pods get; bound to pod `boundTo` when
 * given (the API server then adds the pod's node to the token's user info).
 */
async function tokenOf(
  client: KubeClient,
  ns: string,
  sa: string,
  boundTo?: Pod,
): Promise<string> {
  await waitFor(
    `ServiceAccount ${ns}/${sa}`,
    () => client.get(SERVICE_ACCOUNTS, sa, ns),
    { timeoutMs: 30_000, intervalMs: 200 },
  );
  const review = await client.create<KubeObject & { status?: { token: string } }>({
    group: "",
    version: "v1",
    plural: `serviceaccounts/${sa}/token`,
    kind: "TokenRequest",
    namespaced: true,
  }, {
    apiVersion: "authentication.k8s.io/v1",
    kind: "TokenRequest",
    metadata: { namespace: ns },
    spec: {
      expirationSeconds: 600,
      ...(boundTo
        ? {
          boundObjectRef: {
            apiVersion: "v1",
            kind: "Pod",
            name: boundTo.metadata.name,
            uid: boundTo.metadata.uid,
          },
        }
        : {}),
    },
  });
  return review.status!.token;
}

testOrSkip(realTierSkipReason(), {
  name:
    "admission (real kube-apiserver): only the controller creates pods in the Mountpoint namespace; nobody else changes their spec; the Mountpoint PriorityClasses stay in the driver's namespaces",
  async fn() {
    await using c = await deployCluster("real");
    const ns = await deployDriver(c);
    const mpNs = c.objects.find((o) =>
      o.kind === "Namespace" && o.metadata.name.endsWith("-mp")
    )!.metadata.name;
    const critical = c.objects.find((o) =>
      o.kind === "PriorityClass" && o.metadata.name.endsWith("-critical")
    )!.metadata.name;
    const tenant = `${mpNs.replace(/-mp$/, "")}-tenant`;
    const admin = await loadTarget("admin", c.kubeconfig);
    const as = (name: string, token?: string) =>
      new KubeHttp(token ? { name, server: admin.server, insecure: true, token } : admin);
    const http = {
      admin: as("admin"),
      controller: as("controller", await tokenOf(c.client, ns, CONTROLLER_SERVICE_ACCOUNT)),
      intruder: undefined as KubeHttp | undefined,
    };
    try {
      // Someone with RBAC to create, change and debug pods in the Mountpoint namespace.
      await c.client.create(SERVICE_ACCOUNTS, { metadata: { name: "intruder", namespace: mpNs } });
      await c.client.create(ROLES, {
        metadata: { name: "intruder", namespace: mpNs },
        rules: [{
          apiGroups: [""],
          resources: ["pods", "pods/ephemeralcontainers"],
          verbs: ["create", "get", "update", "patch", "delete"],
        }],
      } as KubeObject);
      await c.client.create(ROLE_BINDINGS, {
        metadata: { name: "intruder", namespace: mpNs },
        roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "Role", name: "intruder" },
        subjects: [{ kind: "ServiceAccount", name: "intruder", namespace: mpNs }],
      } as KubeObject);
      http.intruder = as("intruder", await tokenOf(c.client, mpNs, "intruder"));
      await c.client.create(NAMESPACES, { metadata: { name: tenant } });
      for (const n of [mpNs, tenant]) {
        await waitFor(
          `ServiceAccount ${n}/default`,
          () => c.client.get(SERVICE_ACCOUNTS, "default", n),
          {
            timeoutMs: 30_000,
            intervalMs: 200,
          },
        );
      }
      // A Mountpoint Pod exactly as the controller renders it, under the name it would have.
      const mp = mountpointPod({
        namespace: mpNs,
        image: "registry.example/s3-csi-mounter:test",
        imagePullPolicy: "IfNotPresent",
        command: "/bin/s3-csi-mounter",
        driverVersion: "0.0.0",
        mountpointVersion: "",
        priorityClassName: critical,
        uid: 1000,
        terminationGraceSeconds: 600,
        extraLabels: {},
        cpuRequest: "",
        memoryRequest: "",
        memoryLimit: "",
        caConfigMap: "",
      }, {
        name: `mp-${crypto.randomUUID().slice(0, 8)}`,
        attachmentName: "s3pa-x",
        spec: {
          nodeName: "node-x",
          persistentVolumeName: "pv-x",
          volumeID: "vol-x",
          mountOptions: "",
          workloadFSGroup: "",
          authenticationSource: "driver",
        },
        volumeAttributes: { bucketName: "b" },
      });
      const podsOf = (n: string) => `/api/v1/namespaces/${n}/pods`;
      const create = (who: KubeHttp, n: string, body: unknown, dryRun = true) =>
        who.request("POST", `${podsOf(n)}${dryRun ? "?dryRun=All" : ""}`, { body });
      const refused = (
        r: { status: number; body?: { message?: string } },
        what: string,
        message: RegExp,
      ) => {
        assert.equal(r.status, 403, `${what}: ${r.status} ${r.body?.message}`);
        assert.match(r.body?.message ?? "", message, `${what}: ${r.body?.message}`);
        // deno-lint-ignore no-console
        console.log(`refused (${what}): ${r.body?.message}`);
      };
      const creation = new RegExp(
        `only the S3 CSI controller \\(system:serviceaccount:${ns}:${CONTROLLER_SERVICE_ACCOUNT}\\) may create pods in namespace ${mpNs}`,
      );
      // The policy is loaded a moment after it was created: wait until it refuses.
      let last = "";
      await waitFor("the Mountpoint Pod admission policy to be in force", async () => {
        const r = await create(http.intruder!, mpNs, mp);
        last = `${r.status} ${r.body?.message ?? r.text.slice(0, 300)}`;
        return r.status === 403 && creation.test(r.body?.message ?? "");
      }, { timeoutMs: 30_000, intervalMs: 200 }).catch(async (err) => {
        const policy = await c.client.get(VALIDATING_ADMISSION_POLICIES, MOUNTPOINT_POD_POLICY);
        throw new Error(
          `${err.message}; last answer: ${last}; policy status: ${JSON.stringify(policy?.status)}`,
        );
      });
      refused(
        await create(http.intruder, mpNs, mp),
        "a Mountpoint Pod by another identity",
        creation,
      );
      refused(
        await create(http.admin, mpNs, mp),
        "a Mountpoint Pod by the cluster admin",
        creation,
      );
      // The controller creates it (for real: the next checks change it).
      const made = await create(http.controller, mpNs, mp, false);
      assert.equal(made.status, 201, `the controller's create: ${made.text}`);
      const path = `${podsOf(mpNs)}/${mp.metadata.name}`;
      const patch = (who: KubeHttp, body: unknown, sub = "") =>
        who.request("PATCH", `${path}${sub}`, {
          body,
          contentType: "application/strategic-merge-patch+json",
        });
      refused(
        await patch(http.intruder, {
          spec: { containers: [{ name: "mountpoint", image: "attacker/keys:latest" }] },
        }),
        "another image by another identity",
        new RegExp(
          `only the S3 CSI controller may change the spec .* of pods in namespace ${mpNs}`,
        ),
      );
      refused(
        await patch(http.intruder, {
          spec: {
            ephemeralContainers: [{
              name: "dbg",
              image: "busybox",
              targetContainerName: "mountpoint",
              // Restricted, so that Pod Security does not refuse it first.
              securityContext: {
                runAsNonRoot: true,
                runAsUser: 1000,
                allowPrivilegeEscalation: false,
                capabilities: { drop: ["ALL"] },
                seccompProfile: { type: "RuntimeDefault" },
              },
            }],
          },
        }, "/ephemeralcontainers"),
        "an ephemeral container",
        new RegExp(`ephemeral containers may not be added to pods in namespace ${mpNs}`),
      );
      const annotated = await patch(http.intruder, {
        metadata: { annotations: { "s3.csi.scality.com/no-new-workload": "true" } },
      });
      assert.equal(annotated.status, 200, `annotations stay open: ${annotated.text}`);
      const after = await c.client.get<Pod>(PODS, mp.metadata.name!, mpNs);
      assert.equal(after?.spec.containers[0]?.image, "registry.example/s3-csi-mounter:test");
      await c.client.delete(PODS, mp.metadata.name!, mpNs);
      // The PriorityClass: refused in any other namespace, for anyone.
      const tenantPod = (priorityClassName?: string) => ({
        apiVersion: "v1",
        kind: "Pod",
        metadata: { name: "jumper" },
        spec: {
          ...(priorityClassName ? { priorityClassName } : {}),
          containers: [{ name: "x", image: "busybox" }],
        },
      });
      const reserved = new RegExp(
        `PriorityClass ${critical} is reserved for the S3 CSI driver's Mountpoint Pods \\(namespaces ${ns}, ${mpNs}\\): pods of namespace ${tenant} may not use it`,
      );
      await waitFor("the PriorityClass admission policy to be in force", async () => {
        const r = await create(http.admin, tenant, tenantPod(critical));
        last = `${r.status} ${r.body?.message ?? r.text.slice(0, 300)}`;
        return r.status === 403 && reserved.test(r.body?.message ?? "");
      }, { timeoutMs: 30_000, intervalMs: 200 }).catch(async (err) => {
        const policy = await c.client.get(VALIDATING_ADMISSION_POLICIES, PRIORITY_CLASS_POLICY);
        throw new Error(
          `${err.message}; last answer: ${last}; policy status: ${JSON.stringify(policy?.status)}`,
        );
      });
      refused(await create(http.admin, tenant, tenantPod(critical)), "another namespace", reserved);
      const plain = await create(http.admin, tenant, tenantPod());
      assert.equal(plain.status, 201, `a pod without it is admitted: ${plain.text}`);
    } finally {
      for (const h of Object.values(http)) h?.close();
      await c.client.delete(NAMESPACES, tenant).catch(() => {});
    }
  },
});

testOrSkip(realTierSkipReason(), {
  name:
    "rbac (real kube-apiserver): the controller's token patches a workload only to pin it and remove the headroom gate",
  async fn() {
    await using c = await deployCluster("real");
    const ns = await deployDriver(c);
    const s = crypto.randomUUID().slice(0, 6);
    const work = `vap-work-${s}`;
    let tokenClient: RestKubeClient | undefined;
    try {
      await c.client.create(NAMESPACES, { metadata: { name: work } } as KubeObject);
      await waitFor(
        `ServiceAccount ${CONTROLLER_SERVICE_ACCOUNT}`,
        () => c.client.get(SERVICE_ACCOUNTS, CONTROLLER_SERVICE_ACCOUNT, ns),
        { timeoutMs: 30_000, intervalMs: 200 },
      );
      await waitFor(
        `ServiceAccount ${work}/default`,
        () => c.client.get(SERVICE_ACCOUNTS, "default", work),
        { timeoutMs: 30_000, intervalMs: 200 },
      );
      const pod = (name: string, gates: string[]) =>
        c.client.create<Pod>(PODS, {
          metadata: { name, namespace: work, labels: { app: "x" } },
          spec: {
            schedulingGates: gates.map((g) => ({ name: g })),
            containers: [{ name: "x", image: "busybox" }],
          },
        });
      const gatedName = `gated-${s}`;
      const plainName = `plain-${s}`;
      await pod(gatedName, ["example.com/other", GATE_RESERVE_HEADROOM]);
      await pod(plainName, ["example.com/other"]);
      const token = await tokenOf(c.client, ns, CONTROLLER_SERVICE_ACCOUNT);
      const server = kubeConfigFromFile(c.kubeconfig).server;
      tokenClient = new RestKubeClient({ server, insecureSkipTLSVerify: true, token });
      const refused = async (what: string, name: string, patch: unknown) => {
        const err = await tokenClient!.patch(PODS, name, work, patch).then(
          () => undefined,
          (e: unknown) => e,
        );
        assert.ok(err instanceof ApiError && err.status === 403, `${what} was not refused: ${err}`);
        assert.match(err.message, /S3 CSI controller/, what);
      };
      // The policy is loaded a moment after it is created: wait until a refused patch is refused.
      await waitFor("the admission policy to be in force", async () => {
        const err = await tokenClient!.patch(PODS, plainName, work, {
          metadata: { labels: { probe: "x" } },
        }).then(() => undefined, (e: unknown) => e);
        return err instanceof ApiError && err.status === 403;
      }, { timeoutMs: 30_000, intervalMs: 200 });
      await refused("labelling a pod", gatedName, {
        metadata: { labels: { evil: "1" } },
      });
      await refused("removing another gate", plainName, {
        spec: { schedulingGates: null },
      });
      await refused("removing the gate and relabelling", gatedName, {
        metadata: { labels: { evil: "1" } },
        spec: { schedulingGates: [{ name: "example.com/other" }] },
      });
      await refused("adding a toleration", gatedName, {
        spec: {
          tolerations: [{ key: "evil", operator: "Exists", effect: "NoExecute" }],
          schedulingGates: [{ name: "example.com/other" }],
        },
      });
      // What headroom does (its own patch): allowed.
      const fresh = (await c.client.get<Pod>(PODS, gatedName, work))!;
      await tokenClient.patch(PODS, gatedName, work, pinToNodePatch(fresh, "node-x"));
      const pinned = (await c.client.get<Pod>(PODS, gatedName, work))!;
      assert.deepEqual(pinned.spec.schedulingGates, [{ name: "example.com/other" }]);
      assert.match(JSON.stringify(pinned.spec.affinity), /"values":\["node-x"\]/);
      assert.deepEqual(pinned.metadata.labels, { app: "x" });
    } finally {
      await tokenClient?.close();
      await c.client.delete(NAMESPACES, work).catch(() => false);
    }
  },
});
