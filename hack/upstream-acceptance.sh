#!/usr/bin/env bash
# `make upstream-acceptance`: upstream Poolboy's own acceptance scenarios (the Ansible playbook in
# its test/ folder, role poolboy_test_simple) against this broker, on a fresh control plane of
# their own, with the settings upstream's Development.adoc runs them with: operator domain
# poolboy.dev.local (some scenarios write it literally), operator namespace poolboy-dev, test
# namespace poolboy-dev-test. The control plane is stopped again on any exit.
#
# POOLBOY_UPSTREAM is a checkout of github.com/rhpds/poolboy: the scenarios are read from there,
# not kept here. They need ansible-core 2.16 or later (an earlier one runs a check that has
# `retries` but no `until` once, not until it passes), its kubernetes.core collection, and the
# Python packages kubernetes and jmespath beside it. ANSIBLE_PLAYBOOK names the ansible-playbook
# to run (default: the one on PATH); ANSIBLE_COLLECTIONS_PATH, where kubernetes.core is.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
upstream="${POOLBOY_UPSTREAM:?set POOLBOY_UPSTREAM to a checkout of github.com/rhpds/poolboy}"
playbook="${ANSIBLE_PLAYBOOK:-ansible-playbook}"
domain=poolboy.dev.local
namespace=poolboy-dev
test_namespace=poolboy-dev-test
out="$repo/target/upstream-acceptance"
export POOLBOY_CLUSTER_DIR="$repo/target/upstream-cluster"
# The scenarios run no Pod: the control plane alone.
export POOLBOY_CLUSTER_NODE=0
step() { printf '\n==> %s\n' "$*" >&2; }

[[ -f "$upstream/test/playbook.yaml" ]] || {
  echo "no test/playbook.yaml in POOLBOY_UPSTREAM=$upstream" >&2
  exit 2
}
version="$("$playbook" --version | sed -n 's/.*\[core \([0-9]*\.[0-9]*\).*/\1/p' | head -n 1)"
if [[ -z "$version" ]] || ! printf '2.16\n%s\n' "$version" | sort -C -V; then
  echo "$playbook is ansible-core ${version:-of unknown version}; the scenarios need 2.16 or later" >&2
  exit 2
fi

step "building the control plane (cached after the first time) and poolboy"
hack/cluster/build.sh >/dev/null
cargo build --release --quiet
poolboy="$repo/target/release/poolboy"
mkdir -p "$out"

broker=""
trap 'status=$?; trap - EXIT INT TERM; [[ -n "$broker" ]] && kill "$broker" 2>/dev/null;
  step "stopping the control plane"; "$repo/hack/cluster/cluster.sh" down || true; exit $status' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

step "starting the control plane in $POOLBOY_CLUSTER_DIR"
hack/cluster/cluster.sh up >/dev/null
export KUBECONFIG="$POOLBOY_CLUSTER_DIR/kubeconfig"
export K8S_AUTH_KUBECONFIG="$KUBECONFIG"
kubectl="$POOLBOY_CLUSTER_DIR/bin/kubectl"

step "installing the CRDs of $domain and namespace $namespace"
"$poolboy" crd --operator-domain "$domain" |
  "$kubectl" apply --server-side --field-manager=poolboy-dev -f - >/dev/null
"$kubectl" wait --for=condition=Established --timeout=60s "crd/resourceclaims.$domain" >/dev/null
"$kubectl" create namespace "$namespace" >/dev/null

step "starting the broker (log: $out/broker.log)"
"$poolboy" run --operator-domain "$domain" --operator-namespace "$namespace" \
  --metrics-address 127.0.0.1:0 >"$out/broker.log" 2>&1 &
broker=$!
for _ in $(seq 1 300); do
  grep -q "operator ready" "$out/broker.log" && break
  kill -0 "$broker" 2>/dev/null || { cat "$out/broker.log" >&2; exit 1; }
  sleep 0.1
done

step "running upstream's poolboy_test_simple (log: $out/ansible.log)"
(cd "$upstream/test" && "$playbook" playbook.yaml \
  -e poolboy_domain="$domain" \
  -e poolboy_namespace="$namespace" \
  -e poolboy_service_account="$namespace" \
  -e poolboy_test_namespace="$test_namespace" \
  -e '{"poolboy_tests": ["simple"]}') 2>&1 | tee "$out/ansible.log" |
  grep --line-buffered -E '^(TASK|fatal|PLAY RECAP)|^localhost +:'
exit "${PIPESTATUS[0]}"
