#!/usr/bin/env bash
# `make bench`: the claims benchmark (benches/claims.rs, release build) against a fresh local
# control plane of its own, stopped again on any exit. Prints a table of latencies.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
export POOLBOY_CLUSTER_DIR="$repo/target/bench-cluster"
export POOLBOY_TEST_KUBECONFIG="$POOLBOY_CLUSTER_DIR/kubeconfig"
step() { printf '\n==> %s\n' "$*" >&2; }

step "building the control plane (cached after the first time) and the benchmark"
hack/cluster/build.sh >/dev/null
cargo bench --bench claims --no-run

trap 'status=$?; trap - EXIT INT TERM; step "stopping the control plane"; hack/cluster/cluster.sh down || true; exit $status' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

step "starting the control plane in $POOLBOY_CLUSTER_DIR"
hack/cluster/cluster.sh up >/dev/null

step "cargo bench --bench claims"
cargo bench --bench claims
