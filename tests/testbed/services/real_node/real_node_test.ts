import assert from "node:assert/strict";
import { parseEnvLines, RealNodeError, realNodeFromEnv, realNodeImageValues } from "./real_node.ts";

const START_OUTPUT = `KUBECONFIG=/var/tmp/s3csi-real-node/kubeconfig
REAL_NODE_KUBECTL=/var/cache/s3csi-kube-real/v1.32.13/bin/kubectl
REAL_NODE_NAME=vm
REAL_NODE_IP=192.0.2.2
REAL_NODE_CONTAINERD_ADDRESS=/run/s3csi-real-node/containerd.sock
REAL_NODE_IMAGE_PREFIX=localhost/s3csi-testbed
REAL_NODE_STATE=/var/tmp/s3csi-real-node
`;

Deno.test("start.sh output becomes a RealNode", () => {
  const node = realNodeFromEnv(parseEnvLines(START_OUTPUT));
  assert.deepEqual(node.nodeName, "vm");
  assert.deepEqual(node.containerdAddress, "/run/s3csi-real-node/containerd.sock");
  assert.deepEqual(node.kubectl, "/var/cache/s3csi-kube-real/v1.32.13/bin/kubectl");
});

Deno.test("a missing key or a stray line is an error naming it", () => {
  assert.throws(
    () => realNodeFromEnv(parseEnvLines("KUBECONFIG=/k\n")),
    (e: unknown) => e instanceof RealNodeError && /REAL_NODE_KUBECTL/.test(e.message),
  );
  assert.throws(
    () => parseEnvLines("KUBECONFIG=/k\nnot a pair\n"),
    (e: unknown) => e instanceof RealNodeError && /not a pair/.test(e.message),
  );
});

Deno.test("deploy image values: local driver images, never pulled, stand-in sidecars", () => {
  assert.deepEqual(
    realNodeImageValues({ imagePrefix: "localhost/s3csi-testbed" }, "localhost/s3csi", "0.1.0"),
    {
      registry: "localhost/s3csi",
      tag: "0.1.0",
      pullPolicy: "Never",
      nodeDriverRegistrar: "localhost/s3csi-testbed/csi-node-driver-registrar:standin",
      livenessProbe: "localhost/s3csi-testbed/livenessprobe:standin",
      csiProvisioner: "localhost/s3csi-testbed/csi-provisioner:standin",
    },
  );
});
