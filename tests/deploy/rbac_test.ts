/**
 * RBAC grants no verb a component does not use, and every call a component makes is granted.
 *
 * For the node plugin and the controller the reference is their code: `_api_calls.ts` scans the
 * files each binary reaches from its entrypoint for `client.<verb>(RESOURCE…)` and `new
 * Informer(client, RESOURCE)`. For the csi-provisioner sidecar (not our code) the reference is the
 * sidecar's own `deploy/kubernetes/rbac.yaml` (`github.com/kubernetes-csi/external-provisioner`)
 * trimmed to a driver without topology, attach, snapshots or capacity tracking. Placement is
 * checked too: Mountpoint Pods are written only through a Role in the Mountpoint namespace, Leases
 * only in the driver namespace.
 *
 * @module
 */
import { LEADER_LEASE_NAME } from "../../src/options/controller_options.ts";
import assert from "node:assert/strict";
import type { Manifest, PolicyRule } from "../../src/deploy/k8s_objects.ts";
import {
  ANNOTATION_RBAC_FOR,
  CONTROLLER_DEPLOYMENT,
  CONTROLLER_POLICY,
  CONTROLLER_SERVICE_ACCOUNT,
  MOUNTPOINT_POD_POLICY,
  NODE_DAEMONSET,
  NODE_POLICY,
  NODE_SERVICE_ACCOUNT,
  PRIORITY_CLASS_POLICY,
  PROVISIONER_DEPLOYMENT,
  PROVISIONER_SERVICE_ACCOUNT,
} from "../../src/deploy/names.ts";
import { containersOf } from "../../src/deploy/render.ts";
import {
  PROVISIONER_CONTAINERS,
  SERVICE_ACCOUNT_MOUNT,
  TOKEN_VOLUME,
} from "../../src/deploy/render_provisioner.ts";
import { CONTROLLER_OPTIONS } from "../../src/options/controller_options.ts";
import { TAINT_AGENT_NOT_READY } from "../../src/mppod/labels.ts";
import { renderManifests } from "../../src/deploy/render.ts";
import {
  CONTROLLER_PERMISSIONS,
  NODE_PERMISSIONS,
  type Permission,
  PROVISIONER_PERMISSIONS,
} from "../../src/deploy/render_rbac.ts";
import { resolveValues } from "../../src/deploy/values_validate.ts";
import { type ApiCall, permissionSet, scanApiCalls } from "./_api_calls.ts";
import { ROOT } from "../_helpers.ts";

const values = resolveValues();
const objects = renderManifests(values);

/** `group/resource` → verbs granted to a component by its rendered roles. */
function granted(component: string): Map<string, string[]> {
  const out = new Map<string, Set<string>>();
  for (const o of objects) {
    if (o.kind !== "ClusterRole" && o.kind !== "Role") continue;
    if (o.metadata.annotations?.[ANNOTATION_RBAC_FOR] !== component) continue;
    for (const rule of o.rules as PolicyRule[]) {
      for (const g of rule.apiGroups) {
        for (const r of rule.resources) {
          const key = `${g}/${r}`;
          if (!out.has(key)) out.set(key, new Set());
          for (const v of rule.verbs) out.get(key)!.add(v);
        }
      }
    }
  }
  return new Map([...out].sort().map(([k, v]) => [k, [...v].sort()]));
}

function fromTable(perms: readonly Permission[]): Map<string, string[]> {
  const calls: ApiCall[] = perms.flatMap((p) =>
    p.verbs.map((verb) => ({ group: p.group, resource: p.resource, verb, at: "table" }))
  );
  return permissionSet(calls);
}

function explain(calls: readonly ApiCall[], key: string, verb: string): string {
  return calls.filter((c) => `${c.group}/${c.resource}` === key && c.verb === verb).map((c) => c.at)
    .join(", ");
}

for (
  const [component, entry, table] of [
    ["node", "src/cmd/node/main.ts", NODE_PERMISSIONS],
    ["controller", "src/cmd/controller/main.ts", CONTROLLER_PERMISSIONS],
  ] as const
) {
  Deno.test(`rbac: ${component} is granted exactly the calls its code makes`, async () => {
    const scan = await scanApiCalls(entry);
    assert.deepEqual(scan.unresolved, [], "calls whose resource the scan cannot resolve");
    assert.ok(scan.files.length > 10, `scan reached only ${scan.files.length} files`);
    const used = permissionSet(scan.calls);
    const have = granted(component);
    const extra: string[] = [];
    const missing: string[] = [];
    for (const [key, verbs] of have) {
      for (const v of verbs) if (!used.get(key)?.includes(v)) extra.push(`${v} ${key}`);
    }
    for (const [key, verbs] of used) {
      for (const v of verbs) {
        if (!have.get(key)?.includes(v)) {
          missing.push(`${v} ${key} (${explain(scan.calls, key, v)})`);
        }
      }
    }
    assert.deepEqual(extra, [], `${component} is granted verbs its code never uses`);
    assert.deepEqual(missing, [], `${component} makes calls it is not granted`);
    assert.deepEqual(have, fromTable(table), "rendered rules differ from the permission table");
  });
}

Deno.test("rbac: the mounter makes no API calls (Mountpoint Pods need no RBAC)", async () => {
  const scan = await scanApiCalls("src/cmd/mounter/main.ts");
  assert.deepEqual(scan.calls, []);
  assert.deepEqual(scan.unresolved, []);
});

Deno.test("rbac: csi-provisioner gets the minimum of its upstream RBAC for this driver", () => {
  assert.deepEqual(
    granted("provisioner"),
    new Map([
      ["/events", ["create", "list", "patch", "update", "watch"]],
      ["/nodes", ["get"]],
      ["/persistentvolumeclaims", ["get", "list", "update", "watch"]],
      ["/persistentvolumes", ["create", "delete", "get", "list", "patch", "watch"]],
      ["/secrets", ["get"]],
      ["coordination.k8s.io/leases", ["create", "delete", "get", "list", "update", "watch"]],
      ["storage.k8s.io/storageclasses", ["get", "list", "watch"]],
    ]),
  );
  assert.deepEqual(granted("provisioner"), fromTable(PROVISIONER_PERMISSIONS));
});

Deno.test("rbac: writes are namespaced where they can be; no wildcards; bindings name our accounts", () => {
  const roles = objects.filter((o) => o.kind === "Role" || o.kind === "ClusterRole");
  for (const role of roles) {
    for (const rule of role.rules as PolicyRule[]) {
      for (const x of [...rule.apiGroups, ...rule.resources, ...rule.verbs]) {
        assert.notEqual(x, "*", `${role.metadata.name} uses a wildcard`);
      }
      const writes = rule.verbs.filter((v) => ["create", "update", "patch", "delete"].includes(v));
      if (
        rule.resources.includes("pods") && writes.length &&
        !(role.kind === "ClusterRole" && role.metadata.annotations?.[ANNOTATION_RBAC_FOR] ===
            "controller" &&
          writes.join() === "patch")
      ) {
        assert.equal(role.kind, "Role", "pod writes must be namespaced");
        assert.equal(role.metadata.namespace, values.mountpointPod.namespace);
      }
      if (rule.resources.includes("leases")) {
        assert.equal(role.kind, "Role");
        assert.equal(role.metadata.namespace, values.namespace);
      }
    }
  }
  const bindings = objects.filter((o) =>
    o.kind === "RoleBinding" || o.kind === "ClusterRoleBinding"
  );
  assert.equal(bindings.length, roles.length, "one binding per role");
  for (const b of bindings) {
    const roleRef = b.roleRef as { kind: string; name: string };
    assert.ok(
      roles.some((r: Manifest) =>
        r.kind === roleRef.kind && r.metadata.name === roleRef.name &&
        r.metadata.namespace === b.metadata.namespace
      ),
      `${b.metadata.name} binds a role that is not rendered`,
    );
    for (const s of b.subjects as { kind: string; namespace: string }[]) {
      assert.equal(s.kind, "ServiceAccount");
      assert.equal(s.namespace, values.namespace);
    }
  }
});

Deno.test("rbac: the controller's one cluster-wide pod write (headroom) is narrowed by an admission policy, and goes with headroom", () => {
  const clusterPatch = objects.filter((o) =>
    o.kind === "ClusterRole" && o.metadata.annotations?.[ANNOTATION_RBAC_FOR] === "controller" &&
    (o.rules as PolicyRule[]).some((r) => r.resources.includes("pods") && r.verbs.includes("patch"))
  );
  assert.equal(clusterPatch.length, 1);
  const policy = objects.find((o) =>
    o.kind === "ValidatingAdmissionPolicy" && o.metadata.name === CONTROLLER_POLICY
  );
  assert.ok(policy, "the controller's pod patches are restricted");
  const spec = policy.spec as { matchConditions: { expression: string }[] };
  assert.match(spec.matchConditions[0]!.expression, new RegExp(CONTROLLER_SERVICE_ACCOUNT));
  const off = renderManifests(resolveValues({ mountpointPod: { headroomImage: "" } }));
  assert.ok(
    !off.some((o) =>
      o.kind === "ClusterRole" &&
      (o.rules as PolicyRule[]).some((r) =>
        r.resources.includes("pods") && r.verbs.includes("patch")
      )
    ),
    "headroom off: no cluster-wide pod patch",
  );
  assert.ok(!off.some((o) => o.metadata.name === CONTROLLER_POLICY), "nor its policy");
});

Deno.test("rbac: the Lease the controller renews is the one its Role names", () => {
  const text = Deno.readTextFileSync(`${ROOT}src/controller/run_controller.ts`);
  assert.match(
    text,
    /new LeaderElector\(\{[\s\S]*?\bname: LEADER_LEASE_NAME,/,
    "the controller elects on LEADER_LEASE_NAME",
  );
  const lease = LEADER_LEASE_NAME;
  const named = CONTROLLER_PERMISSIONS.find((p) => p.resource === "leases" && p.resourceNames);
  assert.deepEqual(named?.resourceNames, [lease]);
});

Deno.test("rbac: one ServiceAccount per component; the reconciler can read no Secret and write no PersistentVolume", () => {
  const subjects = new Map<string, Set<string>>();
  for (const b of objects.filter((o) => o.kind.endsWith("RoleBinding"))) {
    const component = b.metadata.annotations?.[ANNOTATION_RBAC_FOR] ?? "";
    for (const s of b.subjects as { name: string }[]) {
      if (!subjects.has(component)) subjects.set(component, new Set());
      subjects.get(component)!.add(s.name);
    }
  }
  assert.deepEqual(
    Object.fromEntries([...subjects].map(([k, v]) => [k, [...v]])),
    {
      node: [NODE_SERVICE_ACCOUNT],
      controller: [CONTROLLER_SERVICE_ACCOUNT],
      provisioner: [PROVISIONER_SERVICE_ACCOUNT],
    },
  );
  const controller = granted("controller");
  assert.equal(controller.get("/secrets"), undefined, "the reconciler reads no Secret");
  assert.deepEqual(controller.get("/persistentvolumes"), ["list", "watch"]);
  assert.deepEqual(controller.get("/persistentvolumeclaims"), ["list", "watch"]);
  // The workloads run as those accounts.
  const workload = (name: string) => {
    const w = objects.find((o) =>
      o.metadata.name === name && (o.kind === "Deployment" || o.kind === "DaemonSet")
    )!;
    return w;
  };
  const podSpec = (w: Manifest) =>
    (w.spec as {
      template: { spec: { serviceAccountName: string; automountServiceAccountToken?: boolean } };
    }).template.spec;
  assert.equal(
    podSpec(workload(CONTROLLER_DEPLOYMENT)).serviceAccountName,
    CONTROLLER_SERVICE_ACCOUNT,
  );
  assert.equal(podSpec(workload(NODE_DAEMONSET)).serviceAccountName, NODE_SERVICE_ACCOUNT);
  const dep = workload(PROVISIONER_DEPLOYMENT);
  assert.equal(podSpec(dep).serviceAccountName, PROVISIONER_SERVICE_ACCOUNT);
  // Only the csi-provisioner container sees the provisioner's token.
  assert.equal(podSpec(dep).automountServiceAccountToken, false);
  for (const c of containersOf(dep)) {
    const mounts = (c.volumeMounts ?? []).filter((m) => m.name === TOKEN_VOLUME);
    if (c.name === PROVISIONER_CONTAINERS.provisioner) {
      assert.deepEqual(mounts.map((m) => [m.mountPath, m.readOnly]), [[
        SERVICE_ACCOUNT_MOUNT,
        true,
      ]]);
    } else assert.deepEqual(mounts, [], `${c.name} must not see the provisioner's token`);
  }
  const service = containersOf(dep).find((c) => c.name === PROVISIONER_CONTAINERS.service)!;
  assert.ok(
    service.env?.some((e) => e.name === CONTROLLER_OPTIONS.reconciler.env && e.value === "false"),
    "the CSI Controller service runs without its reconciler (no API access)",
  );
  // The reconciler's container gets no Secret through its environment either.
  const ctrl = containersOf(workload(CONTROLLER_DEPLOYMENT))[0]!;
  assert.ok(
    !(ctrl.env ?? []).some((e) => e.valueFrom && "secretKeyRef" in e.valueFrom),
    "the reconciler needs no S3 credentials",
  );
});

Deno.test("rbac: the node plugin's Node patch is narrowed by an admission policy, in place before the DaemonSet", () => {
  const policy = objects.find((o) =>
    o.kind === "ValidatingAdmissionPolicy" && o.metadata.name === NODE_POLICY
  )!;
  const binding = objects.find((o) =>
    o.kind === "ValidatingAdmissionPolicyBinding" && o.metadata.name === NODE_POLICY
  )!;
  assert.ok(policy && binding);
  const spec = policy.spec as {
    failurePolicy: string;
    matchConstraints: { resourceRules: { resources: string[]; operations: string[] }[] };
    matchConditions: { expression: string }[];
    validations: { expression: string }[];
  };
  assert.equal(spec.failurePolicy, "Fail");
  assert.deepEqual(spec.matchConstraints.resourceRules.map((r) => [r.resources, r.operations]), [
    [["nodes"], ["UPDATE"]],
  ]);
  assert.equal(
    spec.matchConditions[0]!.expression,
    `request.userInfo.username == 'system:serviceaccount:${values.namespace}:${NODE_SERVICE_ACCOUNT}'`,
  );
  assert.ok(spec.validations.some((v) => v.expression.includes(TAINT_AGENT_NOT_READY)));
  assert.deepEqual(binding.spec, { policyName: NODE_POLICY, validationActions: ["Deny"] });
  const at = (o: Manifest) => objects.indexOf(o);
  const ds = objects.find((o) => o.kind === "DaemonSet")!;
  assert.ok(at(policy) < at(binding) && at(binding) < at(ds), "policy, binding, then DaemonSet");
  // Turned off, nothing is rendered.
  const off = renderManifests(resolveValues({ node: { restrictNodeUpdates: false } }));
  assert.ok(
    !off.some((o) =>
      o.kind.startsWith("ValidatingAdmissionPolicy") && o.metadata.name === NODE_POLICY
    ),
  );
});

Deno.test("rbac: admission policies keep Mountpoint Pods to the controller and the Mountpoint PriorityClasses to the driver's namespaces", () => {
  const named = (kind: string, name: string) =>
    objects.find((o) => o.kind === kind && o.metadata.name === name)!;
  const pods = named("ValidatingAdmissionPolicy", MOUNTPOINT_POD_POLICY).spec as {
    failurePolicy: string;
    matchConstraints: {
      namespaceSelector: unknown;
      resourceRules: { resources: string[]; operations: string[] }[];
    };
    matchConditions: { expression: string }[];
  };
  assert.equal(pods.failurePolicy, "Fail");
  assert.deepEqual(pods.matchConstraints.namespaceSelector, {
    matchLabels: { "kubernetes.io/metadata.name": values.mountpointPod.namespace },
  });
  assert.deepEqual(pods.matchConstraints.resourceRules.map((r) => [r.resources, r.operations]), [
    [["pods", "pods/ephemeralcontainers"], ["CREATE", "UPDATE"]],
  ]);
  assert.equal(
    pods.matchConditions[0]!.expression,
    `request.userInfo.username != 'system:serviceaccount:${values.namespace}:${CONTROLLER_SERVICE_ACCOUNT}'`,
  );
  const classes = named("ValidatingAdmissionPolicy", PRIORITY_CLASS_POLICY).spec as {
    matchConstraints: { namespaceSelector: unknown };
    matchConditions: { expression: string }[];
  };
  assert.deepEqual(classes.matchConstraints.namespaceSelector, {
    matchExpressions: [{
      key: "kubernetes.io/metadata.name",
      operator: "NotIn",
      values: [values.namespace, values.mountpointPod.namespace],
    }],
  });
  assert.match(
    classes.matchConditions[0]!.expression,
    /'mount-s3-critical', 'mount-s3-preempting'/,
  );
  for (const name of [MOUNTPOINT_POD_POLICY, PRIORITY_CLASS_POLICY]) {
    assert.deepEqual(named("ValidatingAdmissionPolicyBinding", name).spec, {
      policyName: name,
      validationActions: ["Deny"],
    });
  }
  // Before the controller, which creates the pods; each can be turned off.
  const at = (o: Manifest) => objects.indexOf(o);
  const binding = named("ValidatingAdmissionPolicyBinding", MOUNTPOINT_POD_POLICY);
  assert.ok(at(binding) < at(named("Deployment", "s3-csi-controller")));
  const off = renderManifests(resolveValues({
    mountpointPod: { restrictPodCreation: false, restrictPriorityClasses: false },
    controller: { restrictPodUpdates: false },
    validateVolumes: false,
  }));
  assert.deepEqual(
    off.filter((o) => o.kind === "ValidatingAdmissionPolicy").map((o) => o.metadata.name),
    [NODE_POLICY],
  );
});
