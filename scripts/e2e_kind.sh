#!/usr/bin/env bash
# `deno task e2e:kind`: end-to-end on a real (kind) cluster.
#   1. create a kind cluster (KIND_CLUSTER, default s3csi-e2e; KIND_NODE_IMAGE to pin Kubernetes);
#   2. build the three images for the local platform (scripts/build_images.sh) and load them;
#   3. deploy with `deno task deploy` (waits for the rollout) and check that kubelet registered the
#      driver on every node (CSINode) and that the startup taint contract holds;
#   4. if an S3 endpoint is given (E2E_S3_ENDPOINT, E2E_S3_BUCKET, E2E_S3_ACCESS_KEY,
#      E2E_S3_SECRET_KEY; reachable from the kind nodes), run the static example and check that a
#      file written in the pod lands in the bucket's mount;
#   5. undeploy --purge and delete the cluster (KEEP=1 keeps it for debugging).
# Skips with a printed reason (exit 0) when docker, kind or kubectl is absent.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

skip() { printf 'e2e:kind: skipped: %s\n' "$1" >&2; exit 0; }
command -v docker >/dev/null 2>&1 || skip "docker is not installed"
docker info >/dev/null 2>&1 || skip "the docker daemon is not reachable"
command -v kind >/dev/null 2>&1 || skip "kind is not installed (https://kind.sigs.k8s.io)"
command -v kubectl >/dev/null 2>&1 || skip "kubectl is not installed"

CLUSTER=${KIND_CLUSTER:-s3csi-e2e}
REGISTRY=${REGISTRY:-localhost/s3csi}
TAG=${TAG:-e2e}
KUBECONFIG_FILE=$(mktemp -t s3csi-kind-kubeconfig.XXXXXX)
export KUBECONFIG="$KUBECONFIG_FILE"
step() { printf '\n=== e2e:kind: %s\n' "$*" >&2; }
fail() { printf 'e2e:kind: FAILED: %s\n' "$*" >&2; kubectl get pods -A -o wide >&2 || true; exit 1; }

cleanup() {
  local rc=$?
  if [ "${KEEP:-}" = "1" ]; then
    printf 'e2e:kind: KEEP=1: cluster %s kept, KUBECONFIG=%s\n' "$CLUSTER" "$KUBECONFIG_FILE" >&2
  else
    kind delete cluster --name "$CLUSTER" >/dev/null 2>&1 || true
    rm -f "$KUBECONFIG_FILE"
  fi
  exit "$rc"
}
trap cleanup EXIT

step "cluster $CLUSTER"
kind create cluster --name "$CLUSTER" --kubeconfig "$KUBECONFIG_FILE" --wait 120s \
  ${KIND_NODE_IMAGE:+--image "$KIND_NODE_IMAGE"}

step "images $REGISTRY/s3-csi-*:$TAG"
REGISTRY="$REGISTRY" TAG="$TAG" PUSH= bash scripts/build_images.sh
for c in node controller mounter; do
  kind load docker-image --name "$CLUSTER" "$REGISTRY/s3-csi-$c:$TAG"
done

set_values="image.registry=$REGISTRY,image.tag=$TAG,image.pullPolicy=IfNotPresent"
if [ -n "${E2E_S3_ENDPOINT:-}" ]; then
  set_values="$set_values,s3.endpointUrl=$E2E_S3_ENDPOINT"
  kubectl -n kube-system create secret generic s3-secret \
    --from-literal=access_key_id="${E2E_S3_ACCESS_KEY:?}" \
    --from-literal=secret_access_key="${E2E_S3_SECRET_KEY:?}"
fi

step "deploy"
deno task deploy --set "$set_values" --wait-timeout 300s || fail "deploy"
step "deploy again: nothing changes"
deno task deploy --set "$set_values" --no-wait | tee /dev/stderr | grep -q ' unchanged$' ||
  fail "second deploy changed objects"

step "kubelet registered the driver on every node"
for node in $(kubectl get nodes -o name); do
  n=${node#node/}
  for _ in $(seq 1 60); do
    kubectl get csinode "$n" -o jsonpath='{.spec.drivers[*].name}' 2>/dev/null |
      grep -qw s3.csi.scality.com && break
    sleep 2
  done
  kubectl get csinode "$n" -o jsonpath='{.spec.drivers[*].name}' | grep -qw s3.csi.scality.com ||
    fail "driver not registered on $n"
  taints=$(kubectl get node "$n" -o jsonpath='{.spec.taints[*].key}')
  case " $taints " in *" s3.csi.scality.com/agent-not-ready "*) fail "taint still on $n" ;; esac
done

if [ -n "${E2E_S3_ENDPOINT:-}" ]; then
  step "static example against $E2E_S3_ENDPOINT bucket ${E2E_S3_BUCKET:?}"
  sed "s/bucketName: my-bucket/bucketName: $E2E_S3_BUCKET/" k8s/examples/static-provisioning.yaml |
    kubectl apply -f -
  kubectl wait --for=condition=Ready pod/s3-static-app --timeout=180s || fail "example pod not Ready"
  kubectl exec s3-static-app -- sh -c 'test -s /data/s3-static-app.txt' || fail "file not written"
  kubectl delete -f k8s/examples/static-provisioning.yaml --wait=true --timeout=120s
else
  printf 'e2e:kind: E2E_S3_ENDPOINT not set: mount scenario skipped\n' >&2
fi

step "undeploy --purge"
deno task undeploy --set "$set_values" --purge --wait-timeout 120s || fail "undeploy"
printf '\ne2e:kind: passed\n' >&2
