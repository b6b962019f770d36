#!/usr/bin/env bash
# `make test`: formatting, lints and every test (unit and integration) against a
# fresh local control plane of its own, which is stopped again on any exit.
#
# The control plane lives in target/test-cluster, so a cluster started by hand
# with `make cluster` (target/cluster) is left alone.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
export POOLBOY_CLUSTER_DIR="$repo/target/test-cluster"
export POOLBOY_TEST_KUBECONFIG="$POOLBOY_CLUSTER_DIR/kubeconfig"

step() { printf '\n==> %s\n' "$*" >&2; }

step "building the control plane (cached after the first time)"
bin_dir="$(hack/cluster/build.sh)"

step "cargo fmt --all -- --check"
cargo fmt --all -- --check

step "cargo clippy --all-targets -- -D warnings"
cargo clippy --all-targets -- -D warnings

step "helm lint helm"
"$bin_dir/helm" lint helm

step "building the tests"
cargo test --no-run

# From here on the control plane runs; bring it down however we leave.
trap 'status=$?; trap - EXIT INT TERM; step "stopping the control plane"; hack/cluster/cluster.sh down || true; exit $status' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

step "starting the control plane and its node in $POOLBOY_CLUSTER_DIR"
hack/cluster/cluster.sh up >/dev/null

# tests/deploy.rs installs the chart with this image on the node.
step "make image (release build, buildah, loaded into the node)"
hack/image/build.sh >/dev/null

# A test that hangs fails the run instead of stalling CI (the whole suite takes minutes).
step "cargo test --no-fail-fast (at most 30 minutes)"
timeout --kill-after=30s 30m cargo test --no-fail-fast
