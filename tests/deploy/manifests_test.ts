/**
 * Tests on the rendered manifests: every container has resources, probes and a non-root or
 * justified security context; the node DaemonSet's mounts and propagation match the paths the node
 * plugin uses (`src/mppod/paths.ts`); the containers' args and env are what the binaries accept;
 * the CSIDriver and the startup-taint toleration follow the contracts; the committed YAML is the
 * generator's output.
 *
 * @module
 */
import assert from "node:assert/strict";
import { parseAllDocuments } from "yaml";
import { NODE_OPTIONS } from "../../src/options/node_options.ts";
import { NODE_CAPABILITIES } from "../../src/node/node_service.ts";
import { CONTROLLER_OPTIONS } from "../../src/options/controller_options.ts";
import {
  COMPONENT_MOUNTPOINT_POD,
  LABEL_COMPONENT,
  LABEL_NEEDS_UNMOUNT,
  TAINT_AGENT_NOT_READY,
} from "../../src/mppod/labels.ts";
import {
  DEFAULT_KUBELET_ROOT,
  hostCommDir,
  pluginDir,
  sourceMountDir,
  sourceMountRoot,
} from "../../src/mppod/paths.ts";
import { parseEndpoint } from "../../src/csi/endpoint.ts";
import type { Container, Manifest, Volume } from "../../src/deploy/k8s_objects.ts";
import { containersOf, renderManifests, toYaml } from "../../src/deploy/render.ts";
import { parseQuantity } from "../../src/kube/quantity.ts";
import { resolveValues } from "../../src/deploy/values_validate.ts";
import { checkContainerConfig } from "../../src/deploy/settings.ts";
import { LOG_OPTIONS } from "../../src/util/log.ts";
import { DRIVER_NAME, DRIVER_VERSION } from "../../src/util/version.ts";
import { ROOT } from "../_helpers.ts";

/** Containers that may run as root, and why. Anything else must be non-root. */
const ROOT_JUSTIFIED: Readonly<Record<string, string>> = {
  "s3-plugin": "mount(2) of FUSE and bind mounts, /dev/fuse, Bidirectional propagation",
  "node-driver-registrar": "creates its socket in the root-owned host dir plugins_registry/",
  "liveness-probe": "connects to the node plugin's root-owned socket in the host plugin dir",
};
/** The only privileged container. */
const PRIVILEGED = new Set(["s3-plugin"]);

function workloads(objects: readonly Manifest[]): Manifest[] {
  return objects.filter((o) => o.kind === "Deployment" || o.kind === "DaemonSet");
}

function podSpec(o: Manifest): Record<string, unknown> & { volumes: Volume[] } {
  return (o.spec as { template: { spec: Record<string, unknown> & { volumes: Volume[] } } })
    .template.spec;
}

function byKind(objects: readonly Manifest[], kind: string): Manifest {
  const o = objects.find((x) => x.kind === kind);
  assert.ok(o, `no ${kind} rendered`);
  return o;
}

function deployment(objects: readonly Manifest[], name: string): Manifest {
  const o = objects.find((x) => x.kind === "Deployment" && x.metadata.name === name);
  assert.ok(o, `no Deployment ${name} rendered`);
  return o;
}

function container(o: Manifest, name: string): Container {
  const c = containersOf(o).find((x) => x.name === name);
  assert.ok(c, `no container ${name} in ${o.metadata.name}`);
  return c;
}

const VARIANTS = {
  defaults: resolveValues(),
  custom: resolveValues({
    namespace: "storage",
    node: {
      kubeletPath: "/var/lib/k0s/kubelet",
      metricsPort: 9100,
      settings: { "read-ahead-kb": "512" },
    },
    controller: { replicas: 2, settings: { workers: "4" } },
    tls: {
      caCertConfigMap: "s3-ca",
      caCertData: "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n",
    },
    proxy: { httpsProxy: "http://proxy:3128", noProxy: "10.0.0.0/8,.svc" },
    image: {
      node: `registry.example.com:5000/s3/node:1.2.3@sha256:${"a".repeat(64)}`,
      mounter: `registry.example.com/s3/mounter@sha256:${"b".repeat(64)}`,
    },
  }),
};

for (const [variant, values] of Object.entries(VARIANTS)) {
  const objects = renderManifests(values);

  Deno.test(`manifests (${variant}): every container has resources, probes and a safe security context`, () => {
    for (const w of workloads(objects)) {
      for (const c of containersOf(w)) {
        const where = `${w.kind} ${w.metadata.name} container ${c.name}`;
        const req = c.resources.requests ?? {};
        const lim = c.resources.limits ?? {};
        assert.ok(req.cpu && req.memory, `${where}: cpu and memory requests`);
        assert.ok(lim.memory, `${where}: memory limit`);
        assert.ok(
          parseQuantity(req.memory)! <= parseQuantity(lim.memory)!,
          `${where}: request ≤ limit`,
        );
        assert.ok(c.livenessProbe, `${where}: livenessProbe`);
        const port = c.livenessProbe.httpGet?.port ?? c.livenessProbe.tcpSocket?.port;
        assert.ok(port !== undefined, `${where}: probe port`);
        const sc = c.securityContext;
        if (sc.privileged) assert.ok(PRIVILEGED.has(c.name), `${where}: privileged`);
        if (sc.runAsNonRoot !== true) {
          assert.ok(ROOT_JUSTIFIED[c.name], `${where}: runs as root without a justification`);
        } else assert.ok((sc.runAsUser as number) > 0, `${where}: non-root uid`);
        if (!sc.privileged) {
          assert.equal(sc.allowPrivilegeEscalation, false, `${where}: allowPrivilegeEscalation`);
          assert.deepEqual(sc.capabilities, { drop: ["ALL"] }, `${where}: capabilities`);
        }
        assert.equal(sc.readOnlyRootFilesystem, true, `${where}: read-only root`);
      }
    }
    // The driver's own long-running containers also have readiness.
    assert.ok(container(byKind(objects, "DaemonSet"), "s3-plugin").readinessProbe);
    assert.ok(
      container(deployment(objects, "s3-csi-controller"), "s3-csi-controller").readinessProbe,
    );
    assert.ok(
      container(deployment(objects, "s3-csi-provisioner"), "s3-csi-provisioning").readinessProbe,
    );
  });

  Deno.test(`manifests (${variant}): node mounts and propagation match the node plugin's paths`, () => {
    const ds = byKind(objects, "DaemonSet");
    const plugin = container(ds, "s3-plugin");
    const volumes = new Map(podSpec(ds).volumes.map((v) => [v.name, v]));
    const env = new Map((plugin.env ?? []).map((e) => [e.name, e]));
    const kubelet = values.node.kubeletPath;
    assert.equal(env.get(NODE_OPTIONS["kubelet-path"].env)?.value, kubelet);
    // Every host path the plugin touches: the host dir must be mounted at the same path, with
    // Bidirectional propagation so mounts made in the container reach kubelet and other pods.
    const paths = [
      pluginDir(kubelet),
      sourceMountRoot(kubelet),
      sourceMountDir(kubelet, "mp-abc"),
      hostCommDir(kubelet, "uid-1"),
      `${kubelet}/pods/uid-2/volumes/kubernetes.io~csi/pv-1/mount`,
    ];
    for (const p of paths) {
      const m = (plugin.volumeMounts ?? []).find((vm) =>
        p === vm.mountPath || p.startsWith(`${vm.mountPath}/`)
      );
      assert.ok(m, `${p} is not under any mount of s3-plugin`);
      const host = volumes.get(m.name)?.hostPath?.path.replace(/\/$/, "");
      assert.equal(host, m.mountPath, `${p}: host path and container path differ`);
      assert.equal(m.mountPropagation, "Bidirectional", `${p}: propagation`);
    }
    // The CSI socket: the plugin listens in the plugin dir, the registrar tells kubelet where it is.
    const endpoint = env.get(NODE_OPTIONS.endpoint.env)?.value;
    assert.ok(endpoint);
    const socket = parseEndpoint(endpoint);
    const socketMount = plugin.volumeMounts!.find((vm) => socket.startsWith(`${vm.mountPath}/`))!;
    assert.equal(
      volumes.get(socketMount.name)?.hostPath?.path.replace(/\/$/, ""),
      pluginDir(kubelet),
    );
    const registrar = container(ds, "node-driver-registrar");
    assert.ok(
      registrar.args!.includes(`--kubelet-registration-path=${pluginDir(kubelet)}/csi.sock`),
    );
    assert.ok(registrar.args!.includes(`--csi-address=${socket}`));
    assert.equal(volumes.get("registration-dir")?.hostPath?.path, `${kubelet}/plugins_registry/`);
    assert.ok(container(ds, "liveness-probe").args!.includes(`--csi-address=${socket}`));
    assert.equal(volumes.get("fuse-device")?.hostPath?.type, "CharDevice");
    assert.ok(plugin.volumeMounts!.some((vm) => vm.mountPath === "/dev/fuse"));
    // Only the plugin propagates mounts.
    for (const c of containersOf(ds)) {
      if (c.name === "s3-plugin") continue;
      for (const vm of c.volumeMounts ?? []) assert.notEqual(vm.mountPropagation, "Bidirectional");
    }
    assert.equal(kubelet === DEFAULT_KUBELET_ROOT, variant === "defaults");
  });

  Deno.test(`manifests (${variant}): containers get only settings their binaries accept`, () => {
    const ds = byKind(objects, "DaemonSet");
    const dep = deployment(objects, "s3-csi-controller");
    const prov = deployment(objects, "s3-csi-provisioner");
    for (
      const [c, specs] of [
        [container(ds, "s3-plugin"), { ...NODE_OPTIONS, ...LOG_OPTIONS }],
        [container(dep, "s3-csi-controller"), { ...CONTROLLER_OPTIONS, ...LOG_OPTIONS }],
        [container(prov, "s3-csi-provisioning"), { ...CONTROLLER_OPTIONS, ...LOG_OPTIONS }],
      ] as const
    ) {
      assert.equal(checkContainerConfig(specs, c.args ?? [], c.env ?? []), undefined, c.name);
      const known = new Set(Object.values(specs).map((s) => (s as { env?: string }).env));
      const foreign = (c.env ?? []).map((e) => e.name).filter((n) =>
        !known.has(n) &&
        !/^(HTTPS?_PROXY|NO_PROXY|https?_proxy|no_proxy|AWS_CA_BUNDLE|DENO_CERT|POD_NAME|AWS_ACCESS_KEY_ID|AWS_SECRET_ACCESS_KEY|AWS_SESSION_TOKEN)$/
          .test(n)
      );
      assert.deepEqual(foreign, [], `${c.name}: env the binary does not read`);
    }
  });

  Deno.test(`manifests (${variant}): CSIDriver, taint toleration, names, images`, () => {
    const driver = byKind(objects, "CSIDriver");
    assert.equal(driver.metadata.name, DRIVER_NAME);
    assert.deepEqual(driver.spec, {
      attachRequired: false,
      podInfoOnMount: true,
      requiresRepublish: true,
      fsGroupPolicy: "File",
      volumeLifecycleModes: ["Persistent", "Ephemeral"],
      tokenRequests: [{ audience: "sts.amazonaws.com", expirationSeconds: 3600 }],
    });
    // fsGroupPolicy File is safe only because kubelet delegates fsGroup to the driver.
    assert.ok(NODE_CAPABILITIES.includes("VOLUME_MOUNT_GROUP"), "File needs VOLUME_MOUNT_GROUP");
    const ds = byKind(objects, "DaemonSet");
    assert.equal(ds.metadata.name, "s3-csi-node");
    assert.deepEqual(
      objects.filter((o) => o.kind === "Deployment").map((o) => o.metadata.name),
      ["s3-csi-controller", "s3-csi-provisioner"],
    );
    const tolerations = podSpec(ds).tolerations as {
      key?: string;
      operator?: string;
      effect?: string;
    }[];
    assert.ok(
      tolerations.some((t) =>
        t.key === TAINT_AGENT_NOT_READY && t.operator === "Exists" && !t.effect
      ),
      "node pods must tolerate the startup taint they remove",
    );
    for (const w of workloads(objects)) {
      for (const c of containersOf(w)) assert.ok(!c.image.endsWith(":latest"), c.image);
    }
    const pcs = objects.filter((o) => o.kind === "PriorityClass").map((o) => o.metadata.name);
    assert.ok(pcs.includes(values.mountpointPod.priorityClassName));
    const env = new Map(
      (container(deployment(objects, "s3-csi-controller"), "s3-csi-controller").env ?? [])
        .map((e) => [e.name, e.value]),
    );
    assert.equal(
      env.get(CONTROLLER_OPTIONS["mountpoint-priority-class-name"].env),
      values.mountpointPod.priorityClassName,
    );
    assert.equal(
      env.get(CONTROLLER_OPTIONS["mountpoint-namespace"].env),
      values.mountpointPod.namespace,
    );
    // The node plugin checks Mountpoint Pods against the controller's settings: the same values.
    const nodeEnv = new Map((container(ds, "s3-plugin").env ?? []).map((e) => [e.name, e.value]));
    for (
      const o of [
        "mountpoint-image",
        "mountpoint-command",
        "mountpoint-uid",
        "mountpoint-cache-size-limit",
      ] as const
    ) {
      assert.ok(env.get(CONTROLLER_OPTIONS[o].env), o);
      assert.equal(nodeEnv.get(NODE_OPTIONS[o].env), env.get(CONTROLLER_OPTIONS[o].env), o);
    }
    if (variant === "defaults") {
      assert.equal(
        container(ds, "s3-plugin").image,
        `ghcr.io/scality/s3-csi-node:${DRIVER_VERSION}`,
      );
    } else {
      assert.match(container(ds, "s3-plugin").image, /@sha256:a{64}$/);
      assert.match(env.get(CONTROLLER_OPTIONS["mountpoint-image"].env)!, /@sha256:b{64}$/);
      assert.equal(
        objects.filter((o) => o.kind === "ConfigMap").length,
        2,
        "CA in both namespaces",
      );
    }
  });
}

Deno.test("manifests: a PodDisruptionBudget protects Mountpoint Pods in use (not released ones)", () => {
  const objects = renderManifests(resolveValues());
  const pdb = objects.find((o) => o.kind === "PodDisruptionBudget");
  assert.ok(pdb, "rendered by default");
  assert.equal(pdb.metadata.namespace, "mount-s3");
  assert.deepEqual(pdb.spec, {
    minAvailable: 2147483647,
    selector: {
      matchLabels: { [LABEL_COMPONENT]: COMPONENT_MOUNTPOINT_POD },
      matchExpressions: [{ key: LABEL_NEEDS_UNMOUNT, operator: "DoesNotExist" }],
    },
    unhealthyPodEvictionPolicy: "IfHealthyBudget",
  });
  const off = renderManifests(resolveValues({ mountpointPod: { disruptionBudget: false } }));
  assert.ok(!off.some((o) => o.kind === "PodDisruptionBudget"));
});

Deno.test("manifests: headroom on renders its PriorityClasses and settings; off renders none of it", () => {
  const names = (objects: Manifest[]) =>
    objects.filter((o) => o.kind === "PriorityClass").map((o) => [
      o.metadata.name,
      o.value,
      o.preemptionPolicy,
    ]);
  const controllerEnv = (objects: Manifest[]) =>
    new Map(
      (container(deployment(objects, "s3-csi-controller"), "s3-csi-controller").env ?? [])
        .map((e) => [e.name, e.value]),
    );
  const on = renderManifests(resolveValues());
  assert.deepEqual(names(on), [
    ["mount-s3-critical", 1_000_000_000, "Never"],
    ["mount-s3-preempting", 999_999_999, "PreemptLowerPriority"],
    ["mount-s3-headroom", -10, "Never"],
  ]);
  const env = controllerEnv(on);
  assert.equal(env.get("MOUNTPOINT_HEADROOM_IMAGE"), "registry.k8s.io/pause:3.10");
  assert.equal(env.get("MOUNTPOINT_HEADROOM_PRIORITY_CLASS_NAME"), "mount-s3-headroom");
  assert.equal(env.get("MOUNTPOINT_PREEMPTING_PRIORITY_CLASS_NAME"), "mount-s3-preempting");
  for (
    const off of [
      { headroomImage: "" },
      { headroomPriorityClassName: "" },
      { preemptingPriorityClassName: "" },
    ]
  ) {
    const objects = renderManifests(resolveValues({ mountpointPod: off }));
    assert.deepEqual(names(objects), [["mount-s3-critical", 1_000_000_000, "Never"]]);
    const e = controllerEnv(objects);
    for (const k of ["IMAGE", "PRIORITY_CLASS_NAME"]) {
      assert.equal(e.get(`MOUNTPOINT_HEADROOM_${k}`), undefined, JSON.stringify(off));
    }
  }
});

Deno.test("manifests: the committed k8s/deploy YAML is the default rendering", () => {
  const committed = Deno.readTextFileSync(`${ROOT}k8s/deploy/s3-csi-driver.yaml`);
  const docs = parseAllDocuments(committed).map((d) => d.toJS()).filter(Boolean);
  assert.deepEqual(docs, JSON.parse(JSON.stringify(renderManifests(resolveValues()))));
  assert.ok(toYaml(docs).length > 1000);
});
