/**
 * The rendered RBAC, deployed to the real kube-apiserver tier (RBAC authorizer), allows every call
 * each component's code makes, in the namespace where it makes it, and refuses neighbouring calls
 * it does not need. Asked with SubjectAccessReviews for the components' ServiceAccounts, so the
 * answer is the real authorizer's, not a reading of our own tables.
 *
 * Skips (printed) without `KUBE_REAL_KUBECONFIG`: the API emulator does not authorize.
 *
 * @module
 */
import assert from "node:assert/strict";
import { GROUP } from "../../src/api/group_version.ts";
import { S3PA_PLURAL } from "../../src/api/mountpoint_s3_pod_attachment.ts";
import { CONTROLLER_SERVICE_ACCOUNT, NODE_SERVICE_ACCOUNT } from "../../src/deploy/names.ts";
import type { KubeObject } from "../../src/kube/client.ts";
import type { Resource } from "../../src/kube/resources.ts";
import { deployCluster, runTask } from "./_deploy_cluster.ts";
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

testOrSkip(realTierSkipReason(), {
  name: "rbac (real kube-apiserver): components may make their calls and nothing next to them",
  async fn() {
    await using c = await deployCluster("real");
    const up = await runTask("deploy", c.kubeconfig, ["--set", c.set, "--no-wait"]);
    assert.equal(up.code, 0, up.stderr);
    const ns = c.objects.find((o) => o.kind === "ServiceAccount")!.metadata.namespace!;
    const mpNs = c.objects.find((o) =>
      o.kind === "Namespace" && o.metadata.name.endsWith("-mp")
    )!.metadata.name;
    const allowed = async (sa: string, a: Ask): Promise<boolean> => {
      const [res, sub] = a.resource.split("/");
      const review = await c.client.create<KubeObject & { status?: { allowed?: boolean } }>(SAR, {
        spec: {
          user: `system:serviceaccount:${ns}:${sa}`,
          groups: [
            "system:serviceaccounts",
            `system:serviceaccounts:${ns}`,
            "system:authenticated",
          ],
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
    const refused: [string, Ask][] = [
      [NODE_SERVICE_ACCOUNT, { verb: "create", group: "", resource: "pods", namespace: mpNs }],
      [NODE_SERVICE_ACCOUNT, { verb: "list", group: "", resource: "pods", namespace: "default" }],
      [NODE_SERVICE_ACCOUNT, { verb: "update", group: GROUP, resource: S3PA_PLURAL }],
      [NODE_SERVICE_ACCOUNT, { verb: "get", group: "", resource: "secrets", namespace: ns }],
      [NODE_SERVICE_ACCOUNT, { verb: "delete", group: "", resource: "nodes" }],
      [CONTROLLER_SERVICE_ACCOUNT, {
        verb: "create",
        group: "",
        resource: "pods",
        namespace: "default",
      }],
      [CONTROLLER_SERVICE_ACCOUNT, {
        verb: "update",
        group: "",
        resource: "pods",
        namespace: mpNs,
      }],
      [CONTROLLER_SERVICE_ACCOUNT, { verb: "patch", group: "", resource: "nodes" }],
      [CONTROLLER_SERVICE_ACCOUNT, { verb: "list", group: "", resource: "secrets" }],
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
    ];
    for (const [sa, a] of refused) {
      assert.equal(await allowed(sa, a), false, `${sa} may ${JSON.stringify(a)}`);
    }
  },
});
