#!/usr/bin/env bash
# `make bench-scale`: the scale benchmark (benches/scale.rs, release build) against a fresh local
# control plane of its own (no node: nothing runs in Pods), stopped again on any exit. Prints a
# table per size of POOLBOY_SCALE_SIZES (default 10000,100000).
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
target="${CARGO_TARGET_DIR:-$repo/target}"
export POOLBOY_CLUSTER_DIR="$target/bench-scale-cluster"
export POOLBOY_TEST_KUBECONFIG="$POOLBOY_CLUSTER_DIR/kubeconfig"
export POOLBOY_CLUSTER_NODE=0
# 100,000 claims, handles and ConfigMaps and their history outgrow etcd's default 2 GiB.
export POOLBOY_ETCD_QUOTA_BYTES="${POOLBOY_ETCD_QUOTA_BYTES:-8589934592}"
step() { printf '\n==> %s\n' "$*" >&2; }

step "building the control plane (cached after the first time) and the benchmark"
hack/cluster/build.sh >/dev/null
cargo bench --bench scale --no-run

trap 'status=$?; trap - EXIT INT TERM; step "stopping the control plane"; hack/cluster/cluster.sh down || true; exit $status' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

step "starting the control plane in $POOLBOY_CLUSTER_DIR"
hack/cluster/cluster.sh up >/dev/null

step "cargo bench --bench scale (sizes ${POOLBOY_SCALE_SIZES:-10000,100000})"
cargo bench --bench scale
