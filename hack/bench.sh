#!/usr/bin/env bash
# `make bench`, `make bench-scale` and `make soak`: benchmark BENCH (claims, the default, scale
# or soak; see benches/BENCH.rs), release build, against a fresh local control plane of its own,
# stopped again on any exit; a second run of the same BENCH meanwhile stops at once.
#   claims  bursts, sustained arrivals, the highest rate held, a quiet minute, replicas
#   scale   the broker at 10,000 and 100,000 bound claims (POOLBOY_SCALE_SIZES); no node, and
#           etcd's quota raised: 100,000 claims, handles and ConfigMaps and their history
#           outgrow its default 2 GiB
#   soak    claims coming and going for SOAK_MINUTES (benches/soak.rs); no node. PROFILE=1
#           builds the broker with a heap profiler (target/soak/dhat-heap.json)
set -euo pipefail

bench="${1:-claims}"
features=()
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
target="${CARGO_TARGET_DIR:-$repo/target}"
case "$bench" in
  claims)
    export POOLBOY_CLUSTER_DIR="$target/bench-cluster"
    ;;
  scale)
    export POOLBOY_CLUSTER_DIR="$target/bench-scale-cluster"
    export POOLBOY_CLUSTER_NODE=0
    export POOLBOY_ETCD_QUOTA_BYTES="${POOLBOY_ETCD_QUOTA_BYTES:-8589934592}"
    ;;
  soak)
    export POOLBOY_CLUSTER_DIR="$target/soak-cluster"
    export POOLBOY_CLUSTER_NODE=0
    export SOAK_OUT="${SOAK_OUT:-$target/soak}"
    if [[ "${PROFILE:-0}" == 1 ]]; then
      features=(--features heap-profile)
      export POOLBOY_HEAP_PROFILE="${POOLBOY_HEAP_PROFILE:-$target/soak/dhat-heap.json}"
    fi
    ;;
  *)
    echo "usage: $0 [claims|scale|soak]" >&2
    exit 2
    ;;
esac
export POOLBOY_TEST_KUBECONFIG="$POOLBOY_CLUSTER_DIR/kubeconfig"
step() { printf '\n==> %s\n' "$*" >&2; }

# One run at a time on a control plane: a second would find the first's cluster up, measure
# beside it, and stop it when it ends. The lock is gone with this run's processes, whatever
# ends them.
mkdir -p "$target"
exec {lock}>"$POOLBOY_CLUSTER_DIR.lock"
if ! flock --nonblock "$lock"; then
  echo "another benchmark is running on $POOLBOY_CLUSTER_DIR; wait for it to end" >&2
  exit 1
fi

step "building the control plane (cached after the first time) and the benchmark"
hack/cluster/build.sh >/dev/null
cargo bench --bench "$bench" "${features[@]}" --no-run

trap 'status=$?; trap - EXIT INT TERM; step "stopping the control plane"; hack/cluster/cluster.sh down || true; exit $status' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

step "starting the control plane in $POOLBOY_CLUSTER_DIR"
# The control plane's daemons do not hold the lock: it is this run's, not the cluster's.
hack/cluster/cluster.sh up >/dev/null {lock}>&-

step "cargo bench --bench $bench ${features[*]}"
cargo bench --bench "$bench" "${features[@]}"
