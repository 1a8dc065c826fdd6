import assert from "node:assert/strict";
import { Code, CsiError } from "../csi/errors.ts";
import {
  mountpointPod,
  type MountpointPodConfig,
  mountpointPodInvariants,
  type MountpointPodTarget,
} from "../mppod/pod_spec.ts";
import type { MountpointPod } from "./mountpoint_pods.ts";
import { checkMountpointPod, podInvariantProblems } from "./pod_invariants.ts";

const CONFIG: MountpointPodConfig = {
  namespace: "mount-s3",
  image: "registry.example/s3-csi-mounter:v1@sha256:" + "a".repeat(64),
  imagePullPolicy: "IfNotPresent",
  command: "/bin/s3-csi-mounter",
  driverVersion: "1.0.0",
  mountpointVersion: "",
  priorityClassName: "mount-s3-critical",
  uid: 1000,
  terminationGraceSeconds: 600,
  extraLabels: { team: "storage" },
  cpuRequest: "50m",
  memoryRequest: "64Mi",
  memoryLimit: "",
  caConfigMap: "",
};
const INV = mountpointPodInvariants(CONFIG);

function target(
  attrs: Record<string, string> = {},
  mountOptions: string[] = [],
): MountpointPodTarget {
  return {
    name: "mp-1",
    attachmentName: "s3pa-1",
    spec: {
      nodeName: "node-1",
      persistentVolumeName: "pv-1",
      volumeID: "vol-1",
      mountOptions: mountOptions.join(","),
      workloadFSGroup: "",
      authenticationSource: "driver",
    },
    volumeAttributes: { bucketName: "b", ...attrs },
    mountOptions,
  };
}

/** A pod object to tamper with, field by field. */
// deno-lint-ignore no-explicit-any
type Editable = Record<string, any>;

/** A pod as the controller renders it, then changed by `edit` (as someone else could make it). */
function pod(edit: (p: Editable) => void = () => {}): MountpointPod {
  const p = structuredClone(mountpointPod(CONFIG, target())) as Editable;
  edit(p);
  return p as MountpointPod;
}

Deno.test("pod invariants: every pod the controller renders passes, whatever its volume", () => {
  const targets = [
    target(),
    target({ cache: "emptyDir", cacheEmptyDirSizeLimit: "1Gi", cacheEmptyDirMedium: "Memory" }),
    target({ cache: "emptyDir" }),
    target({}, ["cache /tmp/x"]),
    target({
      cache: "ephemeral",
      cacheEphemeralStorageClassName: "local",
      cacheEphemeralStorageResourceRequest: "5Gi",
    }),
    target({ mountpointPodServiceAccountName: "irsa" }),
    target({ mountpointContainerResourcesLimitsMemory: "1Gi" }),
  ];
  for (const config of [CONFIG, { ...CONFIG, caConfigMap: "custom-ca", workSizeLimit: "1Gi" }]) {
    for (const t of targets) {
      const p = mountpointPod(config, t) as MountpointPod;
      assert.deepEqual(podInvariantProblems(p, INV), [], JSON.stringify(t.volumeAttributes));
      checkMountpointPod(p, INV, "mount-s3/mp-1");
    }
  }
});

Deno.test("pod invariants: what someone else's pod changes is named", async (t) => {
  const cases: [string, (p: Editable) => void, RegExp][] = [
    [
      "another image",
      (p) => (p.spec.containers[0].image = "evil:1"),
      /image is "evil:1", not "registry/,
    ],
    [
      "another command",
      (p) => (p.spec.containers[0].command = ["sh", "-c", "cat /comm/credentials/*"]),
      /command is \["sh"/,
    ],
    ["args", (p) => (p.spec.containers[0].args = ["--evil"]), /it has args \["--evil"\]/],
    [
      "a second container",
      (p) => p.spec.containers.push({ name: "x", image: "evil" }),
      /2 containers, not 1/,
    ],
    [
      "an init container",
      (p) => (p.spec.initContainers = [{ name: "i", image: "evil" }]),
      /initContainers/,
    ],
    [
      "an ephemeral container",
      (p) => (p.spec.ephemeralContainers = [{ name: "e", image: "evil" }]),
      /ephemeralContainers/,
    ],
    [
      "LD_PRELOAD",
      (p) => p.spec.containers[0].env.push({ name: "LD_PRELOAD", value: "/work/x.so" }),
      /LD_PRELOAD is not the mounter's/,
    ],
    [
      "a moved comm dir",
      (p) => (p.spec.containers[0].env[0].value = "/tmp"),
      /MOUNTER_COMM_DIR is "\/tmp"/,
    ],
    [
      "env from a Secret",
      (p) => (p.spec.containers[0].envFrom = [{ secretRef: { name: "s" } }]),
      /envFrom/,
    ],
    [
      "root",
      (p) => (p.spec.containers[0].securityContext.runAsUser = 0),
      /runs as user 0, not 1000/,
    ],
    ["no uid at all", (p) => {
      delete p.spec.containers[0].securityContext.runAsUser;
      delete p.spec.securityContext.runAsUser;
    }, /runs as user none, not 1000/],
    [
      "another group",
      (p) => (p.spec.containers[0].securityContext.runAsGroup = 0),
      /runs as group 0/,
    ],
    ["privileged", (p) => (p.spec.containers[0].securityContext.privileged = true), /privileged/],
    ["the host's PIDs", (p) => (p.spec.hostPID = true), /hostPID is true/],
    ["a hostPath volume", (p) => {
      p.spec.volumes.push({ name: "host", hostPath: { path: "/" } });
      p.spec.containers[0].volumeMounts.push({ name: "host", mountPath: "/host" });
    }, /volume host is not one of comm, work, cache, custom-ca/],
    [
      "work as a hostPath",
      (p) => (p.spec.volumes[1] = { name: "work", hostPath: { path: "/var" } }),
      /volume work is hostPath, not emptyDir/,
    ],
    ["a custom CA from a Secret", (p) => {
      p.spec.volumes.push({ name: "custom-ca", secret: { secretName: "x" } });
      p.spec.containers[0].volumeMounts.push({
        name: "custom-ca",
        mountPath: "/etc/ssl/custom-ca",
        readOnly: true,
      });
    }, /volume custom-ca is secret, not configMap/],
    [
      "work mounted over /bin",
      (p) => (p.spec.containers[0].volumeMounts[1].mountPath = "/bin"),
      /volume work is mounted at "\/bin", not "\/work"/,
    ],
    ["a sub-path", (p) => (p.spec.containers[0].volumeMounts[0].subPath = "x"), /with a sub-path/],
    ["no comm volume", (p) => {
      p.spec.volumes.shift();
      p.spec.containers[0].volumeMounts.shift();
    }, /volume comm is missing/],
    [
      "no component label",
      (p) => delete p.metadata.labels["s3.csi.scality.com/component"],
      /label s3\.csi\.scality\.com\/component is none, not "mountpoint-pod"/,
    ],
    [
      "no driver version label",
      (p) => delete p.metadata.labels["s3.csi.scality.com/mounted-by-csi-driver-version"],
      /mounted-by-csi-driver-version is missing/,
    ],
  ];
  for (const [name, edit, expected] of cases) {
    await t.step(name, () => {
      const problems = podInvariantProblems(pod(edit), INV);
      assert.ok(problems.some((p) => expected.test(p)), `${name}: ${JSON.stringify(problems)}`);
      assert.throws(
        () => checkMountpointPod(pod(edit), INV, "mount-s3/mp-1"),
        (e: unknown) =>
          e instanceof CsiError && e.code === Code.FAILED_PRECONDITION &&
          /Mountpoint Pod mount-s3\/mp-1 is not the pod the controller renders \(.+\): it gets no credentials/
            .test(e.message),
      );
    });
  }
});

Deno.test("pod invariants: the expectations follow the configured image, command and uid", () => {
  const other = mountpointPodInvariants({ image: "other:2", command: "/bin/m", uid: 2000 });
  const problems = podInvariantProblems(pod(), other);
  assert.deepEqual(problems, [
    'image is "registry.example/s3-csi-mounter:v1@sha256:' + "a".repeat(64) + '", not "other:2"',
    'command is ["/bin/s3-csi-mounter"], not ["/bin/m"]',
    "it runs as user 1000, not 2000",
    "it runs as group 1000, not 2000",
  ]);
});
