#!/usr/bin/env bash
# `make chaos`: the long chaos run of tests/chaos.rs (release build), three times with
# different seeds, against a fresh control plane of its own (the run restarts its API
# server), stopped again on any exit. CHAOS_RUNS changes the count; CHAOS_SEED replays one run.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
export POOLBOY_CLUSTER_DIR="$repo/target/chaos-cluster"
export POOLBOY_TEST_KUBECONFIG="$POOLBOY_CLUSTER_DIR/kubeconfig"
# The API-server restart needs no node; the node would only slow the restart down.
export POOLBOY_CLUSTER_NODE=0
runs="${CHAOS_RUNS:-3}"
step() { printf '\n==> %s\n' "$*" >&2; }

step "building the control plane (cached after the first time) and the chaos test"
hack/cluster/build.sh >/dev/null
cargo test --release --test chaos --no-run

trap 'status=$?; trap - EXIT INT TERM; step "stopping the control plane"; hack/cluster/cluster.sh down || true; exit $status' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

step "starting the control plane in $POOLBOY_CLUSTER_DIR"
hack/cluster/cluster.sh up >/dev/null

for run in $(seq 1 "$runs"); do
  step "chaos run $run of $runs"
  cargo test --release --test chaos -- --ignored --nocapture 2>&1 | grep --line-buffered -E '^chaos:|test result|panicked|FAILED'
  [[ "${PIPESTATUS[0]}" == 0 ]] || exit 1
done
