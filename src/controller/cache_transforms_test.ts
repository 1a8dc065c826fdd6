import assert from "node:assert/strict";
import type { Pod } from "../kube/types.ts";
import { slimPod, withoutManagedFields } from "./cache_transforms.ts";

const FULL: Pod = {
  apiVersion: "v1",
  kind: "Pod",
  metadata: {
    name: "w",
    namespace: "ns",
    uid: "u",
    resourceVersion: "9",
    creationTimestamp: "2030-01-01T00:00:00Z",
    deletionTimestamp: "2030-01-01T00:01:00Z",
    labels: { app: "web" },
    annotations: {
      "kubectl.kubernetes.io/last-applied-configuration": "{…big…}",
      "s3.csi.scality.com/needs-unmount": "true",
    },
    managedFields: [{ manager: "kubectl" }],
    ownerReferences: [{ kind: "ReplicaSet" }],
  },
  spec: {
    nodeName: "n1",
    containers: [{ name: "app", image: "busybox", env: [{ name: "A", value: "1" }] }],
    volumes: [
      { name: "data", persistentVolumeClaim: { claimName: "c" } },
      { name: "cfg", configMap: { name: "x" } },
      {
        name: "inline",
        csi: { driver: "s3.csi.scality.com", volumeAttributes: { bucketName: "b" } },
      },
      { name: "other-csi", csi: { driver: "ebs.csi.aws.com" } },
    ],
    serviceAccountName: "app",
    securityContext: { fsGroup: 0, runAsUser: 1000 },
    tolerations: [
      { key: "k" },
      { key: "dedicated", operator: "Exists", effect: "NoSchedule" },
      { key: "gone", operator: "Exists", effect: "NoExecute", tolerationSeconds: 300 },
    ],
    priority: 0,
    nodeSelector: { disk: "ssd" },
  },
  status: {
    phase: "Running",
    conditions: [
      { type: "PodScheduled", status: "True", lastTransitionTime: "2030-01-01T00:00:01Z" },
      { type: "Ready", status: "True" },
    ],
    containerStatuses: [{ name: "app", ready: true }],
  },
};

Deno.test("slimPod keeps exactly what the controller reads", () => {
  assert.deepEqual(slimPod(FULL), {
    apiVersion: "v1",
    kind: "Pod",
    metadata: {
      name: "w",
      namespace: "ns",
      uid: "u",
      resourceVersion: "9",
      creationTimestamp: "2030-01-01T00:00:00Z",
      deletionTimestamp: "2030-01-01T00:01:00Z",
      labels: { app: "web" },
      annotations: { "s3.csi.scality.com/needs-unmount": "true" },
    },
    spec: {
      nodeName: "n1",
      containers: [],
      volumes: [
        { name: "data", persistentVolumeClaim: { claimName: "c" } },
        {
          name: "inline",
          csi: { driver: "s3.csi.scality.com", volumeAttributes: { bucketName: "b" } },
        },
      ],
      serviceAccountName: "app",
      securityContext: { fsGroup: 0 },
      // The NoExecute tolerations (a Mountpoint Pod must cover them), normalized; the priority.
      tolerations: [
        { key: "gone", operator: "Exists", effect: "NoExecute" },
        { key: "k", operator: "Equal", value: "" },
      ],
      priority: 0,
    },
    status: {
      phase: "Running",
      conditions: [
        { type: "PodScheduled", status: "True", lastTransitionTime: "2030-01-01T00:00:01Z" },
      ],
    },
  });
});

Deno.test("slimPod of a workload waiting for the headroom gate keeps what its placement copies", () => {
  const gated: Pod = {
    metadata: { name: "g", namespace: "n", uid: "u", resourceVersion: "3" },
    spec: {
      schedulingGates: [{ name: "other" }, {
        name: "s3.csi.scality.com/reserve-headroom-for-mppod",
      }],
      nodeSelector: { disk: "ssd" },
      affinity: { nodeAffinity: { x: 1 }, podAntiAffinity: { y: 2 } },
      tolerations: [{ key: "dedicated", operator: "Exists", effect: "NoSchedule" }],
      priority: 100,
      preemptionPolicy: "Never",
      overhead: { cpu: "10m" },
      initContainers: [{ name: "i", image: "x", resources: { requests: { cpu: "1" } } }],
      containers: [{ name: "c", image: "x", env: [], resources: { requests: { cpu: "200m" } } }],
    },
  };
  assert.deepEqual(slimPod(gated).spec, {
    containers: [{ name: "c", resources: { requests: { cpu: "200m" } } }],
    initContainers: [{ name: "i", resources: { requests: { cpu: "1" } } }],
    schedulingGates: gated.spec.schedulingGates,
    nodeSelector: { disk: "ssd" },
    affinity: gated.spec.affinity,
    tolerations: gated.spec.tolerations,
    priority: 100,
    preemptionPolicy: "Never",
    overhead: { cpu: "10m" },
  });
});

Deno.test("slimPod of a pending, unscheduled pod without volumes", () => {
  assert.deepEqual(
    slimPod({ metadata: { name: "p", namespace: "n" }, spec: { containers: [] } }),
    {
      metadata: {
        name: "p",
        namespace: "n",
        uid: undefined,
        resourceVersion: undefined,
        creationTimestamp: undefined,
      },
      spec: { containers: [] },
      status: {},
    },
  );
});

Deno.test("withoutManagedFields drops only metadata.managedFields", () => {
  const obj = { metadata: { name: "x", managedFields: [{}], labels: { a: "b" } }, spec: { y: 1 } };
  assert.deepEqual(withoutManagedFields(obj), {
    metadata: { name: "x", labels: { a: "b" } },
    spec: { y: 1 },
  });
  const plain = { metadata: { name: "x" } };
  assert.equal(withoutManagedFields(plain), plain);
});
