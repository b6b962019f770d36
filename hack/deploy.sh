#!/usr/bin/env bash
# `make deploy`: the local cluster with its node (make cluster), the image (make image), and the
# chart installed from helm/ as release `poolboy` with that image and examples/values.yaml; the
# broker runs in a Pod in namespace poolboy. Then the example providers and pool.
#
# `make undeploy` (hack/deploy.sh uninstall) uninstalls the release.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
export POOLBOY_CLUSTER_DIR="${POOLBOY_CLUSTER_DIR:-$repo/target/cluster}"
export KUBECONFIG="$POOLBOY_CLUSTER_DIR/kubeconfig"
kubectl="$POOLBOY_CLUSTER_DIR/bin/kubectl"
helm="$POOLBOY_CLUSTER_DIR/bin/helm"
step() { printf '\n==> %s\n' "$*" >&2; }

if [[ "${1:-}" == uninstall ]]; then
  "$helm" uninstall poolboy --wait --timeout 2m
  exit 0
fi

step "starting the local cluster and its node"
hack/cluster/cluster.sh up >/dev/null

step "building the image and loading it into the node"
image="$(hack/image/build.sh)"

step "namespaces of the examples, and the AnarchySubject CRD"
for namespace in user1 poolboy-managed anarchy; do
  "$kubectl" create namespace "$namespace" --dry-run=client -o yaml | "$kubectl" apply -f - >/dev/null
done
"$kubectl" apply --server-side --field-manager=poolboy-dev -f examples/anarchy-subject-crd.yaml >/dev/null

step "helm upgrade --install poolboy helm/ (image $image)"
# A rebuilt image has the same tag: restart the Pod so that it runs the new one.
"$helm" upgrade --install poolboy helm -f examples/values.yaml \
  --set image.repository="${image%:*}" --set image.tagOverride="${image##*:}" \
  --set image.pullPolicy=Never \
  --set-string podAnnotations.poolboy/image-archive-digest="$(sha256sum target/image/poolboy.oci.tar | cut -c1-16)" \
  --wait --timeout 3m

step "the example providers and pool"
for file in examples/provider-*.yaml examples/pool-*.yaml; do
  "$kubectl" apply -f "$file" >/dev/null
done

cat >&2 <<MSG

The broker runs in the cluster:

  export KUBECONFIG=$KUBECONFIG PATH=$POOLBOY_CLUSTER_DIR/bin:\$PATH
  kubectl -n poolboy get pods
  kubectl -n poolboy logs deploy/poolboy -f
  kubectl apply -f examples/claim-configmap.yaml
  kubectl get pbclaim -n user1 -w

make undeploy uninstalls it (the CRDs and your objects stay).
MSG
