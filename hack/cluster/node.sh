# The local cluster's one node, sourced by cluster.sh (which defines dir, pki, bin_dir,
# node_bin_dir, node_name, start, wait_for, live_pid, api_get, write_kubeconfig, free_port,
# stop_components, log).
#
# - containerd (Debian's package) with its own config, root, state and socket under $dir/node,
#   runc, and the CNI bridge + host-local plugins (Debian's containernetworking-plugins);
# - a bridge this script creates, pb<id>, on a free 10.x.y.0/24 (<id> comes from $dir, so two
#   clusters on one machine never share a bridge, a cgroup root or a subnet). Pods get an
#   address there and one route only, to the Service range 10.0.0.0/24: they reach nothing
#   else. Their `kubernetes` Service address 10.0.0.1:443 is DNATed to the API server on
#   127.0.0.1 (route_localnet on the bridge), which is what kube-proxy would do for it;
# - kubelet and kube-scheduler, built from the same Kubernetes release (build.sh --node);
# - the sandbox image localhost/pause:<tag>, made from the pause binary with buildah.
#
# Stopping (stop_node) drains the Pods through the kubelet first (so CNI, volumes and cgroups
# are released the normal way), then removes whatever is left: containers, mounts under $dir,
# network namespaces on our subnet, the bridge, the DNAT rule and the cgroups.

node_dir="$dir/node"
node_id="$(printf '%s' "$dir" | sha256sum | cut -c1-8)"
node_bridge="pb$node_id"
node_cgroup_root="/poolboy-$node_id"
node_rule_comment="poolboy-node-$node_id"
node_socket="$node_dir/containerd.sock"

ctr_() { ctr --address "$node_socket" --namespace k8s.io "$@"; }

node_ready() {
  [[ -f "$dir/kubeconfig" ]] || return 1
  local ready
  ready="$(api_get "/api/v1/nodes/$node_name" 2>/dev/null |
    tr -d ' \n' | grep -o '"type":"Ready","status":"[A-Za-z]*"' || true)"
  [[ "$ready" == '"type":"Ready","status":"True"' ]]
}

node_schedulable() {
  node_ready || return 1
  ! api_get "/api/v1/nodes/$node_name" 2>/dev/null | tr -d ' \n' | grep -q '"taints":'
}

# A 10.x.y.0/24 no interface or route on this machine uses yet, starting from one derived from
# the node id. Prints the subnet's first three octets.
free_subnet() {
  local n=$((16#${node_id:0:4})) i prefix
  for ((i = 0; i < 200; i++)); do
    prefix="10.$((100 + (n + i) % 100)).$(((n / 100 + i) % 256))"
    if ! ip -4 route show | grep -q "^$prefix\\." && ! ip -4 addr show | grep -q " $prefix\\."; then
      echo "$prefix"
      return 0
    fi
  done
  return 1
}

# The OCI archive of the sandbox image, made once per node build.
pause_archive() {
  local tag archive work
  tag="$(<"$node_bin_dir/pause.tag")"
  archive="$node_bin_dir/pause-$tag.oci.tar"
  if [[ ! -s "$archive" ]]; then
    work="$(buildah --root "$node_bin_dir/.buildah" --runroot "$node_dir/buildah-run" \
      from --quiet scratch)" || return 1
    (
      set -e
      b=(buildah --root "$node_bin_dir/.buildah" --runroot "$node_dir/buildah-run")
      "${b[@]}" copy --quiet "$work" "$node_bin_dir/pause" /pause >/dev/null
      "${b[@]}" config --entrypoint '["/pause"]' --user 65535:65535 "$work"
      "${b[@]}" commit --quiet --format oci "$work" "localhost/pause:$tag" >/dev/null
      "${b[@]}" push --quiet "localhost/pause:$tag" \
        "oci-archive:$archive.tmp:localhost/pause:$tag"
      "${b[@]}" rm "$work" >/dev/null
      mv -f "$archive.tmp" "$archive"
    ) >&2 || return 1
  fi
  echo "$archive"
}

write_node_config() {
  mkdir -p "$node_dir/cni" "$node_dir/cni-ipam" "$node_dir/pod-logs" "$node_dir/kubelet"
  cat >"$node_dir/containerd.toml" <<EOF
version = 2
root = "$node_dir/containerd/root"
state = "$node_dir/containerd/state"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs", "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]
[grpc]
  address = "$node_socket"
[ttrpc]
  address = "$node_socket.ttrpc"
[metrics]
  address = ""
[plugins."io.containerd.internal.v1.opt"]
  path = "$node_dir/containerd/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "localhost/pause:$(<"$node_bin_dir/pause.tag")"
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  enable_selinux = false
  # This machine's root lacks CAP_SYS_RESOURCE, so the kubelet's negative oom_score_adj for
  # sandboxes (-998) cannot be written: keep every container at containerd's own (0) or above.
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$node_dir/cni"
    max_conf_num = 1
EOF
  cat >"$node_dir/cni/10-poolboy.conflist" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "poolboy-$node_id",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$node_bridge",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "dataDir": "$node_dir/cni-ipam",
        "ranges": [[{"subnet": "$node_subnet.0/24", "gateway": "$node_subnet.1"}]],
        "routes": [{"dst": "10.0.0.0/24"}]
      }
    }
  ]
}
EOF
  cat >"$node_dir/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# The node's address is the bridge's gateway: the kubelet refuses a loopback node IP.
address: $node_subnet.1
port: $kubelet_port
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: $kubelet_healthz_port
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: false
  x509:
    clientCAFile: $pki/ca.crt
authorization:
  mode: AlwaysAllow
containerRuntimeEndpoint: unix://$node_socket
imageServiceEndpoint: unix://$node_socket
cgroupDriver: cgroupfs
cgroupRoot: $node_cgroup_root
cgroupsPerQOS: true
enforceNodeAllocatable: [pods]
failSwapOn: false
failCgroupV1: false
podLogsDir: $node_dir/pod-logs
maxPods: 30
serializeImagePulls: true
# A busy development disk must not evict the broker, nor garbage-collect its image.
evictionHard:
  memory.available: 100Mi
  nodefs.available: 1%
  imagefs.available: 1%
  nodefs.inodesFree: 1%
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
EOF
}

start_node() {
  mkdir -p "$node_dir"
  node_subnet="$(free_subnet)" || {
    log "no free 10.x.y.0/24 for the node's bridge"
    return 1
  }
  echo "$node_subnet" >"$node_dir/subnet"
  kubelet_port="$(free_port)"
  kubelet_healthz_port="$(free_port)"
  write_node_config

  # The bridge, its gateway address, and the route to the API server for the Pods.
  ip link add "$node_bridge" type bridge || return 1
  ip addr add "$node_subnet.1/24" dev "$node_bridge" || return 1
  ip link set "$node_bridge" up || return 1
  echo 1 >"/proc/sys/net/ipv4/conf/$node_bridge/route_localnet" || return 1
  iptables -t nat -A PREROUTING -i "$node_bridge" -p tcp -d 10.0.0.1 --dport 443 \
    -m comment --comment "$node_rule_comment" \
    -j DNAT --to-destination "127.0.0.1:$api_port" || return 1

  start containerd --config "$node_dir/containerd.toml"
  wait_for 30 containerd ctr_ version || return 1
  local archive
  archive="$(pause_archive)" || {
    log "building the pause image with buildah failed"
    return 1
  }
  ctr_ images import "$archive" >/dev/null || return 1

  write_kubeconfig "$node_dir/scheduler.kubeconfig" scheduler system:kube-scheduler
  start kube-scheduler --kubeconfig="$node_dir/scheduler.kubeconfig" \
    --leader-elect=false --secure-port=0

  # The kubelet's cgroup root must exist in every hierarchy (cgroup v1: one per controller).
  local hierarchy
  for hierarchy in /sys/fs/cgroup/*/; do
    [[ -e "$hierarchy/cgroup.procs" ]] || continue
    mkdir -p "$hierarchy${node_cgroup_root#/}" || return 1
  done
  if [[ -e /sys/fs/cgroup/cgroup.controllers ]]; then # cgroup v2 alone
    mkdir -p "/sys/fs/cgroup${node_cgroup_root}" || return 1
  fi

  write_kubeconfig "$node_dir/kubelet.kubeconfig" kubelet "system:node:$node_name"
  start kubelet --config="$node_dir/kubelet.yaml" \
    --kubeconfig="$node_dir/kubelet.kubeconfig" \
    --root-dir="$node_dir/kubelet" \
    --hostname-override="$node_name" --node-ip="$node_subnet.1"
  # Ready, and the not-ready taint the kubelet registers with removed (node-lifecycle).
  wait_for 90 kubelet node_schedulable || return 1
  live_pid kube-scheduler >/dev/null || {
    log "kube-scheduler exited; last lines of $dir/kube-scheduler.log:"
    tail -n 25 "$dir/kube-scheduler.log" >&2 || true
    return 1
  }
}

node_usage() {
  [[ "$node_enabled" == 1 ]] || return 0
  cat <<EOF
Node $node_name: Pods on bridge $node_bridge ($(cat "$node_dir/subnet" 2>/dev/null).0/24),
  containerd: ctr --address $node_socket -n k8s.io images ls
EOF
}

# Stops the node and removes everything it made on this machine; safe to call on a node that
# never started or is half gone.
stop_node() {
  local subnet=""
  [[ -f "$node_dir/subnet" ]] && subnet="$(<"$node_dir/subnet")"

  # 1. The kubelet stops the Pods itself: CNI DEL, volumes unmounted, cgroups removed. The
  #    controller-manager is stopped already, so nothing comes back.
  if live_pid kubelet >/dev/null && live_pid kube-apiserver >/dev/null; then
    local kubectl=("$bin_dir/kubectl" --kubeconfig "$dir/kubeconfig" --request-timeout=10s)
    if "${kubectl[@]}" delete pods --all --all-namespaces --grace-period=5 --wait=false \
      >/dev/null 2>&1; then
      local deadline=$((SECONDS + 60))
      while ((SECONDS < deadline)) &&
        [[ -n "$("${kubectl[@]}" get pods -A -o name 2>/dev/null)" ]]; do
        sleep 0.5
      done
      [[ -z "$("${kubectl[@]}" get pods -A -o name 2>/dev/null)" ]] ||
        log "some Pods were not stopped by the kubelet in 60 s; removing them by force"
    fi
  fi
  stop_components kubelet

  # 2. Whatever the kubelet left: every task killed and every container deleted.
  if live_pid containerd >/dev/null; then
    local id
    for id in $(ctr_ tasks ls -q 2>/dev/null); do
      ctr_ tasks kill --signal SIGKILL "$id" >/dev/null 2>&1 || true
    done
    for id in $(ctr_ tasks ls -q 2>/dev/null); do
      ctr_ tasks delete --force "$id" >/dev/null 2>&1 || true
    done
    for id in $(ctr_ containers ls -q 2>/dev/null); do
      ctr_ containers delete "$id" >/dev/null 2>&1 || true
    done
  fi
  stop_components containerd

  # 3. The host: network namespaces with an address on our subnet, the bridge, the DNAT rule,
  #    mounts under $dir, the cgroups.
  if [[ -n "$subnet" ]]; then
    local netns
    for netns in $(ip netns list 2>/dev/null | awk '{print $1}'); do
      if ip -n "$netns" -4 -o addr show 2>/dev/null | grep -q " inet $subnet\\."; then
        ip netns delete "$netns" 2>/dev/null || log "cannot delete network namespace $netns"
      fi
    done
  fi
  if ip link show "$node_bridge" >/dev/null 2>&1; then
    ip link delete "$node_bridge" || log "cannot delete bridge $node_bridge"
  fi
  local rule
  while rule="$(iptables -t nat -S PREROUTING 2>/dev/null | grep -- "--comment $node_rule_comment" |
    head -n 1)" && [[ -n "$rule" ]]; do
    # shellcheck disable=SC2086 # the rule's own words
    eval "iptables -t nat ${rule/-A /-D }" || {
      log "cannot delete iptables rule: $rule"
      break
    }
  done
  local mount
  for mount in $(findmnt -rn -o TARGET 2>/dev/null | grep -F "$dir/" | sort -r); do
    umount "$mount" 2>/dev/null || umount -l "$mount" 2>/dev/null || log "cannot unmount $mount"
  done
  local hierarchy
  for hierarchy in /sys/fs/cgroup/*/ /sys/fs/cgroup/; do
    [[ -d "$hierarchy${node_cgroup_root#/}" ]] || continue
    find "$hierarchy${node_cgroup_root#/}" -depth -type d -exec rmdir {} + 2>/dev/null ||
      log "cannot remove cgroup $hierarchy${node_cgroup_root#/}"
  done
}
