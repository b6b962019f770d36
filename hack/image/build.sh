#!/usr/bin/env bash
# `make image`: the poolboy image, built here, offline: the release binary and the libraries it
# loads (hack/image/rootfs.sh, the layout of the Containerfile's runtime stage) on an empty base,
# assembled with buildah, written as an OCI archive to target/image/poolboy.oci.tar, and loaded
# into the local node's containerd when the cluster in $POOLBOY_CLUSTER_DIR (default
# target/cluster) is up.
#
# Prints the image name (localhost/poolboy:v<version>).
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$repo"
dir="${POOLBOY_CLUSTER_DIR:-$repo/target/cluster}"
out="$repo/target/image"
step() { printf '==> %s\n' "$*" >&2; }

hack/node-deps.sh

version="$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -n 1)"
revision="$(git rev-parse HEAD 2>/dev/null || echo unknown)"
[[ -z "$(git status --porcelain 2>/dev/null)" ]] || revision="$revision-dirty"
image="localhost/poolboy:v$version"

step "cargo build --release"
cargo build --release --quiet --bin poolboy

step "assembling the root filesystem"
mkdir -p "$out"
rm -rf -- "$out/rootfs" "$out/poolboy"
cp target/release/poolboy "$out/poolboy"
strip "$out/poolboy"
hack/image/rootfs.sh "$out/poolboy" "$out/rootfs"

step "building $image with buildah"
buildah=(buildah --root "$out/storage" --runroot "$out/run")
work="$("${buildah[@]}" from --quiet scratch)"
trap '"${buildah[@]}" rm "$work" >/dev/null 2>&1 || true' EXIT
"${buildah[@]}" copy --quiet "$work" "$out/rootfs/" / >/dev/null
labels=(
  org.opencontainers.image.title=poolboy
  "org.opencontainers.image.description=A Kubernetes resource pool broker, wire-compatible with Poolboy 1.17"
  "org.opencontainers.image.version=$version"
  "org.opencontainers.image.revision=$revision"
  org.opencontainers.image.source=https://github.com/poolboy/poolboy
  org.opencontainers.image.licenses=Apache-2.0
)
config=(--user 65532:65532 --entrypoint '["/usr/local/bin/poolboy"]' --cmd run --port 9091)
for label in "${labels[@]}"; do
  config+=(--label "$label" --annotation "$label")
done
"${buildah[@]}" config "${config[@]}" "$work"
"${buildah[@]}" commit --quiet --format oci --rm "$work" "$image" >/dev/null
trap - EXIT
rm -f "$out/poolboy.oci.tar"
"${buildah[@]}" push --quiet "$image" "oci-archive:$out/poolboy.oci.tar:$image"
# Keep only the archive: the next build starts from scratch anyway.
"${buildah[@]}" rmi --all --force >/dev/null 2>&1 || true
step "$image: $(du -h "$out/poolboy.oci.tar" | cut -f1) archive ($out/poolboy.oci.tar)"

socket="$dir/node/containerd.sock"
if [[ -S "$socket" ]] && ctr --address "$socket" version >/dev/null 2>&1; then
  step "loading $image into the node's containerd ($socket)"
  ctr --address "$socket" --namespace k8s.io images import "$out/poolboy.oci.tar" >/dev/null
  loaded="$(ctr --address "$socket" --namespace k8s.io images ls -q)"
  grep -qx "$image" <<<"$loaded" || {
    echo "image: $image is not in the node's containerd after the import" >&2
    exit 1
  }
else
  step "no node running in $dir (make cluster): the image is not loaded anywhere"
fi
echo "$image"
