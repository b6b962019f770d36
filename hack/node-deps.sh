#!/usr/bin/env bash
# Installs, from Debian's packages, what the local node and `make image` need when it is missing:
# containerd, runc, the CNI plugins, iptables, buildah (and gcc for the pause binary). Needs root
# (the node runs containers) and apt-get; prints what it installs.
set -euo pipefail

need=()
command -v containerd >/dev/null 2>&1 || need+=(containerd)
command -v runc >/dev/null 2>&1 || need+=(runc)
[[ -x /usr/lib/cni/bridge && -x /usr/lib/cni/host-local && -x /usr/lib/cni/loopback ]] ||
  need+=(containernetworking-plugins)
command -v iptables >/dev/null 2>&1 || need+=(iptables)
command -v buildah >/dev/null 2>&1 || need+=(buildah)
command -v gcc >/dev/null 2>&1 || need+=(gcc libc6-dev)
command -v findmnt >/dev/null 2>&1 || need+=(util-linux)
((${#need[@]})) || exit 0

if [[ "$(id -u)" != 0 ]] || ! command -v apt-get >/dev/null 2>&1; then
  echo "node-deps: missing ${need[*]}; install them (Debian: apt-get install ${need[*]}) as root" >&2
  exit 1
fi
echo "node-deps: installing ${need[*]} with apt-get" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >&2
apt-get install -y -qq --no-install-recommends "${need[@]}" >&2
