#!/usr/bin/env bash
# Build the local control plane (etcd, kube-apiserver, kube-controller-manager)
# and the matching kubectl and helm from the Go modules pinned in this
# directory's go.mod/go.sum.
#
# Binaries go to ${XDG_CACHE_HOME:-$HOME/.cache}/poolboy-cluster/<key>/bin, where
# <key> is a hash of go.mod + go.sum + $recipe: a version change makes a new key
# and a rebuild; otherwise nothing is rebuilt. Prints the bin directory.
#
# The node (kubelet, kube-scheduler, and the pause binary of the Pods' sandbox image) is a
# second, separate build: node/go.mod pins the same k8s.io/kubernetes release, and its own key
# (node/go.mod + node/go.sum + $node_recipe) names ${XDG_CACHE_HOME:-$HOME/.cache}/poolboy-cluster/
# node-<key>/bin, so the control plane's key and cache never change because of the node.
#
# Usage: hack/cluster/build.sh                 build if needed, print the bin dir
#        hack/cluster/build.sh --bin-dir       print the bin dir only (no build)
#        hack/cluster/build.sh --node          build the node if needed, print its bin dir
#        hack/cluster/build.sh --node-bin-dir  print the node's bin dir only (no build)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# Bump when the way the binaries are built changes (flags, stamped versions).
recipe=2
node_recipe=1
key="$( (cat "$here/go.mod" "$here/go.sum" && echo "recipe $recipe") | sha256sum | cut -c1-16)"
node_key="$( (cat "$here/node/go.mod" "$here/node/go.sum" && echo "recipe $node_recipe") |
  sha256sum | cut -c1-16)"
cache_root="${XDG_CACHE_HOME:-$HOME/.cache}/poolboy-cluster"

case "${1:-}" in
--bin-dir)
  echo "$cache_root/$key/bin"
  exit 0
  ;;
--node-bin-dir)
  echo "$cache_root/node-$node_key/bin"
  exit 0
  ;;
--node)
  node=1
  module_dir="$here/node"
  bin_dir="$cache_root/node-$node_key/bin"
  # package path -> binary name; pause is compiled from C below.
  packages=(
    "k8s.io/kubernetes/cmd/kube-scheduler:kube-scheduler"
    "k8s.io/kubernetes/cmd/kubelet:kubelet"
  )
  ;;
"")
  node=0
  module_dir="$here"
  bin_dir="$cache_root/$key/bin"
  # package path -> binary name. Built one after another: the machines have two
  # cores and linking kube-apiserver alone takes several GiB.
  packages=(
    "go.etcd.io/etcd/server/v3:etcd"
    "k8s.io/kubernetes/cmd/kube-apiserver:kube-apiserver"
    "k8s.io/kubernetes/cmd/kube-controller-manager:kube-controller-manager"
    "k8s.io/kubernetes/cmd/kubectl:kubectl"
    "helm.sh/helm/v3/cmd/helm:helm"
  )
  ;;
*)
  echo "usage: $0 [--bin-dir | --node | --node-bin-dir]" >&2
  exit 2
  ;;
esac

if ! command -v go >/dev/null 2>&1; then
  echo "hack/cluster/build.sh: 'go' not found on PATH; Go >= 1.24 is needed to build the control plane" >&2
  exit 1
fi

mkdir -p "$bin_dir"
# Two checkouts building at once: the second waits, then finds the binaries.
exec 9>"$bin_dir/../build.lock"
flock 9
cd "$module_dir"

# Stamp the versions as the upstream release builds do: without it the API
# server reports v0.0.0-master (and helm's chart kubeVersion checks fail).
k8s_version="$(go list -m -f '{{.Version}}' k8s.io/kubernetes)"  # v1.34.4
k8s_major_minor="${k8s_version#v}"
k8s_major="${k8s_major_minor%%.*}"
k8s_minor="${k8s_major_minor#*.}"
k8s_minor="${k8s_minor%%.*}"
k8s_stamp=""
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  k8s_stamp+=" -X $pkg.gitVersion=$k8s_version -X $pkg.gitMajor=$k8s_major"
  k8s_stamp+=" -X $pkg.gitMinor=$k8s_minor -X $pkg.gitTreeState=clean"
done
helm_stamp=""
if ((!node)); then
  helm_version="$(go list -m -f '{{.Version}}' helm.sh/helm/v3)"
  helm_stamp=" -X helm.sh/helm/v3/internal/version.version=$helm_version"
  for pkg in helm.sh/helm/v3/pkg/lint/rules helm.sh/helm/v3/pkg/chartutil; do
    helm_stamp+=" -X $pkg.k8sVersionMajor=$k8s_major -X $pkg.k8sVersionMinor=$k8s_minor"
  done
fi

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
  case "$name" in
  kube*) stamp="$k8s_stamp" ;;
  helm) stamp="$helm_stamp" ;;
  *) stamp="" ;; # etcd's version is a constant in its source
  esac
  CGO_ENABLED=0 go build -mod=readonly -trimpath -ldflags="-s -w$stamp" \
    -o "$bin_dir/.$name.tmp" "$pkg"
  mv -f "$bin_dir/.$name.tmp" "$bin_dir/$name"
  echo "built $name in $((SECONDS - start))s" >&2
done

# The sandbox ("pause") process of every Pod, from the C source in the same Kubernetes module
# (no image registry to pull registry.k8s.io/pause from): cluster.sh wraps it in an image.
if ((node)) && [[ ! -x "$bin_dir/pause" ]]; then
  command -v gcc >/dev/null 2>&1 || {
    echo "hack/cluster/build.sh: 'gcc' is needed to build the pause binary of the node" >&2
    exit 1
  }
  k8s_dir="$(go mod download -json k8s.io/kubernetes | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
  pause_tag="$(sed -n 's/^TAG ?= //p' "$k8s_dir/build/pause/Makefile")"
  gcc -Os -Wall -Werror -static -DVERSION="v$pause_tag-$k8s_version" \
    -o "$bin_dir/.pause.tmp" "$k8s_dir/build/pause/linux/pause.c"
  strip "$bin_dir/.pause.tmp"
  echo "$pause_tag" >"$bin_dir/pause.tag"
  mv -f "$bin_dir/.pause.tmp" "$bin_dir/pause"
  echo "built pause $pause_tag" >&2
fi
echo "$bin_dir"
