#!/usr/bin/env bash
# Where kube-apiserver's CPU goes: a CPU profile of the local control plane's API server over
# SECONDS (default 20), saved to OUT (default target/apiserver.pprof), and its top functions
# (cumulative) printed with `go tool pprof`.
#
# The cluster must run with POOLBOY_APISERVER_PROFILING=1 (hack/cluster/cluster.sh), e.g.
#   POOLBOY_APISERVER_PROFILING=1 POOLBOY_BENCH_SCENARIOS=fill,warm make bench
# and, from another shell while the phase of interest runs,
#   POOLBOY_CLUSTER_DIR=target/bench-cluster hack/profile-apiserver.sh 20
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dir="${POOLBOY_CLUSTER_DIR:-$repo/target/cluster}"
seconds="${1:-20}"
out="${2:-$repo/target/apiserver.pprof}"
pki="$dir/pki"
[[ -f "$dir/apiserver.port" ]] || {
  echo "no control plane in $dir (set POOLBOY_CLUSTER_DIR)" >&2
  exit 1
}
curl --silent --show-error --fail --max-time "$((seconds + 30))" \
  --cacert "$pki/ca.crt" --cert "$pki/admin.crt" --key "$pki/admin.key" \
  --output "$out" \
  "https://127.0.0.1:$(<"$dir/apiserver.port")/debug/pprof/profile?seconds=$seconds" || {
  echo "no profile: is the API server running with POOLBOY_APISERVER_PROFILING=1?" >&2
  exit 1
}
echo "profile: $out" >&2
go tool pprof -top -cum -nodecount=60 "$out" 2>/dev/null
