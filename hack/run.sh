#!/usr/bin/env bash
# `make run`: brings up the local control plane (target/cluster), installs the CRDs and the
# examples, and runs the broker in the foreground until Ctrl-C. The control plane stays up
# afterwards (`make cluster-down` stops it).
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
step() { printf '\n==> %s\n' "$*" >&2; }

step "starting the local control plane"
hack/cluster/cluster.sh up >/dev/null
export KUBECONFIG="$repo/target/cluster/kubeconfig"
kubectl="$repo/target/cluster/bin/kubectl"

step "building poolboy"
cargo build --quiet
poolboy="$repo/target/debug/poolboy"

step "installing the CRDs"
"$poolboy" crd | "$kubectl" apply --server-side --field-manager=poolboy-dev -f - >/dev/null
"$kubectl" apply --server-side --field-manager=poolboy-dev -f examples/anarchy-subject-crd.yaml >/dev/null
"$kubectl" wait --for=condition=Established --timeout=60s \
  crd/resourceclaims.poolboy.gpte.redhat.com crd/anarchysubjects.anarchy.gpte.redhat.com >/dev/null

step "creating namespaces poolboy (operator), user1 (claims), poolboy-managed and anarchy"
for namespace in poolboy user1 poolboy-managed anarchy; do
  "$kubectl" create namespace "$namespace" --dry-run=client -o yaml | "$kubectl" apply -f - >/dev/null
done

step "installing the example providers and pool"
for file in examples/provider-*.yaml examples/pool-*.yaml; do
  "$kubectl" apply -f "$file" >/dev/null
done

cat >&2 <<MSG

The broker runs below (Ctrl-C stops it). In another terminal:

  export KUBECONFIG=$KUBECONFIG PATH=$repo/target/cluster/bin:\$PATH
  kubectl apply -f examples/claim-configmap.yaml
  kubectl get resourceclaims.poolboy.gpte.redhat.com -n user1 -w   # watch it bind
  kubectl get poolboy -n poolboy                  # pools and handles
  kubectl get configmaps -n poolboy-managed

MSG
exec "$poolboy" run --operator-namespace poolboy --metrics-address 127.0.0.1:9091
