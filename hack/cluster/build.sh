#!/usr/bin/env bash
# Build the local control plane (etcd, kube-apiserver, kube-controller-manager,
# helm) from the Go modules pinned in this directory's go.mod/go.sum.
#
# Binaries go to ${XDG_CACHE_HOME:-$HOME/.cache}/poolboy-cluster/<key>/bin, where
# <key> is a hash of go.mod + go.sum + this script: a version change makes a new
# key and a rebuild; otherwise nothing is rebuilt. Prints the bin directory.
#
# Usage: hack/cluster/build.sh            build if needed, print the bin dir
#        hack/cluster/build.sh --bin-dir  print the bin dir only (no build)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
key="$(cat "$here/go.mod" "$here/go.sum" "$here/build.sh" | sha256sum | cut -c1-16)"
cache_root="${XDG_CACHE_HOME:-$HOME/.cache}/poolboy-cluster"
bin_dir="$cache_root/$key/bin"

if [[ "${1:-}" == "--bin-dir" ]]; then
  echo "$bin_dir"
  exit 0
fi

# package path -> binary name. Built one after another: the machines have two
# cores and linking kube-apiserver alone takes several GiB.
packages=(
  "go.etcd.io/etcd/server/v3:etcd"
  "k8s.io/kubernetes/cmd/kube-apiserver:kube-apiserver"
  "k8s.io/kubernetes/cmd/kube-controller-manager:kube-controller-manager"
  "helm.sh/helm/v3/cmd/helm:helm"
)

if ! command -v go >/dev/null 2>&1; then
  echo "hack/cluster/build.sh: 'go' not found on PATH; Go >= 1.24 is needed to build the control plane" >&2
  exit 1
fi

mkdir -p "$bin_dir"
cd "$here"
for entry in "${packages[@]}"; do
  pkg="${entry%%:*}"
  name="${entry##*:}"
  if [[ -x "$bin_dir/$name" ]]; then
    continue
  fi
  echo "building $name from $pkg (cached in $bin_dir) ..." >&2
  start=$SECONDS
  # Build into a temporary name and rename, so an interrupted build never
  # leaves a half-written binary that looks cached.
  CGO_ENABLED=0 go build -mod=readonly -trimpath -ldflags='-s -w' -o "$bin_dir/.$name.tmp" "$pkg"
  mv "$bin_dir/.$name.tmp" "$bin_dir/$name"
  echo "built $name in $((SECONDS - start))s" >&2
done
echo "$bin_dir"
