#!/usr/bin/env bash
# Smoke test of a running kube_real control plane with kubectl: namespaces, a
# Pending pod (no kubelet), a cluster-scoped CRD with selectableFields and a
# field-selector list, and ownerReference garbage collection by the KCM.
#
# Usage: KUBECONFIG="$(tests/testbed/services/kube_real/start.sh)" tests/testbed/services/kube_real/smoke.sh
#   exit 0 all checks passed | 1 a check failed
set -euo pipefail
: "${KUBECONFIG:?set KUBECONFIG (tests/testbed/services/kube_real/start.sh prints it)}"
export KUBECONFIG
NS="kr-smoke-$$"
CRD=widgets.smoke.kube-real.test
fail() {
  echo "kube_real smoke: FAIL: $*" >&2
  exit 1
}
ok() { echo "kube_real smoke: ok: $*" >&2; }
cleanup() {
  kubectl delete ns "$NS" --wait=false --ignore-not-found >/dev/null 2>&1 || true
  kubectl delete crd "$CRD" --wait=false --ignore-not-found >/dev/null 2>&1 || true
}
trap cleanup EXIT

kubectl get ns default >/dev/null || fail "kubectl get ns"
ok "kubectl get ns ($(kubectl version -o json | sed -n 's/.*"gitVersion": "\(v[^"]*\)".*/\1/p' | tail -n1))"

kubectl create ns "$NS" >/dev/null
# The ServiceAccount admission plugin rejects pods until the namespace's
# "default" ServiceAccount exists (created by the KCM a moment later).
for _ in $(seq 1 50); do kubectl -n "$NS" get sa default >/dev/null 2>&1 && break; sleep 0.2; done
kubectl -n "$NS" run smoke --image=registry.invalid/none:0 --restart=Never >/dev/null
[ "$(kubectl -n "$NS" get pod smoke -o jsonpath='{.status.phase}')" = Pending ] || fail "pod not Pending"
ok "namespace $NS and a Pending pod"

kubectl apply -f - >/dev/null <<YAML
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: $CRD
spec:
  group: smoke.kube-real.test
  scope: Cluster
  names: {plural: widgets, singular: widget, kind: Widget}
  versions:
  - name: v1
    served: true
    storage: true
    selectableFields:
    - jsonPath: .spec.color
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              color: {type: string}
YAML
kubectl wait --for condition=Established "crd/$CRD" --timeout=30s >/dev/null
kubectl apply -f - >/dev/null <<YAML
apiVersion: smoke.kube-real.test/v1
kind: Widget
metadata: {name: red-$$}
spec: {color: red}
---
apiVersion: smoke.kube-real.test/v1
kind: Widget
metadata: {name: blue-$$}
spec: {color: blue}
YAML
got="$(kubectl get "widgets.smoke.kube-real.test" --field-selector spec.color=red -o name)"
[ "$got" = "widget.smoke.kube-real.test/red-$$" ] || fail "field selector spec.color=red gave '$got'"
ok "CRD selectableFields: --field-selector spec.color=red -> $got"

kubectl -n "$NS" create configmap owner --from-literal=a=b >/dev/null
uid="$(kubectl -n "$NS" get cm owner -o jsonpath='{.metadata.uid}')"
kubectl apply -f - >/dev/null <<YAML
apiVersion: v1
kind: ConfigMap
metadata:
  name: dependent
  namespace: $NS
  ownerReferences:
  - {apiVersion: v1, kind: ConfigMap, name: owner, uid: "$uid"}
data: {x: "1"}
YAML
kubectl -n "$NS" get cm dependent >/dev/null || fail "dependent ConfigMap not created"
kubectl -n "$NS" delete cm owner >/dev/null
gone=""
for _ in $(seq 1 150); do
  if ! kubectl -n "$NS" get cm dependent >/dev/null 2>&1; then
    gone=1
    break
  fi
  sleep 0.2
done
[ -n "$gone" ] || fail "dependent ConfigMap not garbage-collected within 30s"
ok "garbage collection of an owned ConfigMap"

kubectl delete "widgets.smoke.kube-real.test" --all >/dev/null
kubectl delete crd "$CRD" >/dev/null
kubectl delete ns "$NS" --timeout=60s >/dev/null || fail "namespace deletion did not finish"
ok "namespace deletion (namespace controller)"
echo "kube_real smoke: all checks passed" >&2
