#!/usr/bin/env bash
# A local Kubernetes control plane for tests and local runs: the real etcd,
# kube-apiserver and kube-controller-manager (built by build.sh), on 127.0.0.1,
# on free ports, with their state, logs and pid files under one directory.
#
# Usage: hack/cluster/cluster.sh up       start (a no-op when already up)
#        hack/cluster/cluster.sh down     stop everything it started, remove the state
#        hack/cluster/cluster.sh status   exit 0 when up and ready
#
# POOLBOY_CLUSTER_DIR picks the state directory (default: <repo>/target/cluster).
# The admin kubeconfig is written to $POOLBOY_CLUSTER_DIR/kubeconfig.
#
# The cluster has one node (node.sh): containerd, kubelet and kube-scheduler, with Pods on a
# bridge of its own; POOLBOY_CLUSTER_NODE=0 starts the control plane alone.
#
# POOLBOY_ETCD_QUOTA_BYTES raises etcd's --quota-backend-bytes (default: etcd's own, 2 GiB), for
# runs that store more (make bench-scale: 100,000 claims, handles and ConfigMaps).
#
# POOLBOY_APISERVER_PROFILING=1 serves kube-apiserver's /debug/pprof (off by default), for
# hack/profile-apiserver.sh: where the API server's CPU goes during a benchmark.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
dir="${POOLBOY_CLUSTER_DIR:-$repo/target/cluster}"
pki="$dir/pki"
node_enabled="${POOLBOY_CLUSTER_NODE:-1}"
etcd_quota="${POOLBOY_ETCD_QUOTA_BYTES:-}"
apiserver_profiling="${POOLBOY_APISERVER_PROFILING:-0}"
node_name=poolboy-node
# Stop order; start order is the reverse (the node's components stop first, see stop_all).
control_plane=(kube-controller-manager kube-apiserver etcd)
node_components=(kube-scheduler kubelet containerd)
components=("${control_plane[@]}")
if [[ "$node_enabled" == 1 ]]; then
  components=("${node_components[@]}" "${control_plane[@]}")
fi

# Where build.sh puts (or has put) the binaries; cmd_up builds them.
bin_dir="$("$here/build.sh" --bin-dir)"
node_bin_dir="$("$here/build.sh" --node-bin-dir)"

log() { echo "cluster: $*" >&2; }
die() {
  echo "cluster: ERROR: $*" >&2
  exit 1
}

# The pid in $dir/<name>.pid, if that process is alive and still runs <name>
# (a stale pid file must never make us signal an unrelated process).
live_pid() {
  local name="$1" pid argv0
  [[ -f "$dir/$name.pid" ]] || return 1
  pid="$(<"$dir/$name.pid")"
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  argv0="$(tr '\0' '\n' 2>/dev/null <"/proc/$pid/cmdline" | head -n 1)" || return 1
  [[ "$(basename -- "$argv0")" == "$name" ]] || return 1
  echo "$pid"
}

api_get() {
  curl --silent --show-error --fail --max-time 5 \
    --cacert "$pki/ca.crt" --cert "$pki/admin.crt" --key "$pki/admin.key" \
    "https://127.0.0.1:$(<"$dir/apiserver.port")$1"
}

is_up() {
  local name
  for name in "${components[@]}"; do
    live_pid "$name" >/dev/null || return 1
  done
  [[ -f "$dir/kubeconfig" ]] && api_get /readyz >/dev/null 2>&1 || return 1
  [[ "$node_enabled" != 1 ]] || node_ready
}

# A port nobody listens on. Random in 10000-31999 (below Linux's ephemeral
# range), so two checkouts starting at once are unlikely to pick the same one;
# a clash that still happens makes a component fail to start, and `up` retries.
declare -A taken_ports=()
free_port() {
  local port
  while :; do
    port=$((10000 + RANDOM % 22000))
    [[ -z "${taken_ports[$port]:-}" ]] || continue
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
      taken_ports[$port]=1
      echo "$port"
      return
    fi
  done
}

# wait_for <seconds> <component> <command...>: poll until the command succeeds;
# fail early when the component died.
wait_for() {
  local timeout="$1" name="$2"
  shift 2
  local deadline=$((SECONDS + timeout))
  until "$@" >/dev/null 2>&1; do
    if ! live_pid "$name" >/dev/null; then
      log "$name exited during start-up; last lines of $dir/$name.log:"
      tail -n 25 "$dir/$name.log" >&2 || true
      return 1
    fi
    if ((SECONDS >= deadline)); then
      log "$name not ready after ${timeout}s; last lines of $dir/$name.log:"
      tail -n 25 "$dir/$name.log" >&2 || true
      return 1
    fi
    sleep 0.2
  done
}

start() {
  local name="$1" path
  shift
  if [[ -x "$bin_dir/$name" ]]; then
    path="$bin_dir/$name"
  elif [[ -n "${node_bin_dir:-}" && -x "$node_bin_dir/$name" ]]; then
    path="$node_bin_dir/$name"
  else
    path="$(command -v "$name")" || die "$name not found"
  fi
  # setsid: the processes outlive `make cluster` and its terminal.
  setsid "$path" "$@" >"$dir/$name.log" 2>&1 </dev/null &
  echo $! >"$dir/$name.pid"
}

gen_pki() {
  mkdir -p "$pki"
  (
    cd "$pki"
    local ec=(genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256)
    openssl "${ec[@]}" -out ca.key 2>/dev/null
    openssl req -x509 -new -key ca.key -sha256 -days 3650 -subj "/CN=poolboy-local-ca" \
      -addext "basicConstraints=critical,CA:TRUE" \
      -addext "keyUsage=critical,keyCertSign,cRLSign" -out ca.crt 2>/dev/null
    # leaf <name> <subject> <extensions>
    leaf() {
      openssl "${ec[@]}" -out "$1.key" 2>/dev/null
      openssl req -new -key "$1.key" -subj "$2" 2>/dev/null |
        openssl x509 -req -CA ca.crt -CAkey ca.key -CAcreateserial -sha256 -days 3650 \
          -extfile <(printf '%s\n' "basicConstraints=critical,CA:FALSE" \
            "keyUsage=critical,digitalSignature" "$3") \
          -out "$1.crt" 2>/dev/null
    }
    leaf apiserver "/CN=kube-apiserver" "extendedKeyUsage=serverAuth
subjectAltName=IP:127.0.0.1,IP:10.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
    # Both identities are cluster-admins through the system:masters group.
    leaf admin "/O=system:masters/CN=poolboy-admin" "extendedKeyUsage=clientAuth"
    leaf controller-manager "/O=system:masters/CN=system:kube-controller-manager" \
      "extendedKeyUsage=clientAuth"
    leaf scheduler "/O=system:masters/CN=system:kube-scheduler" "extendedKeyUsage=clientAuth"
    leaf kubelet "/O=system:masters/O=system:nodes/CN=system:node:$node_name" \
      "extendedKeyUsage=clientAuth"
    # Service-account token signing key pair (TokenRequest API).
    openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out sa.key 2>/dev/null
    openssl pkey -in sa.key -pubout -out sa.pub 2>/dev/null
  ) || die "generating certificates with openssl failed"
}

# write_kubeconfig <file> <cert/key name> <user>
write_kubeconfig() {
  local b64=(base64 -w0)
  cat >"$1" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: poolboy-local
  cluster:
    server: https://127.0.0.1:$api_port
    certificate-authority-data: $("${b64[@]}" <"$pki/ca.crt")
users:
- name: $3
  user:
    client-certificate-data: $("${b64[@]}" <"$pki/$2.crt")
    client-key-data: $("${b64[@]}" <"$pki/$2.key")
contexts:
- name: poolboy-local
  context:
    cluster: poolboy-local
    user: $3
current-context: poolboy-local
EOF
}

# One attempt at starting the three components; returns 1 on failure.
# start_apiserver: kube-apiserver on the port and etcd of this cluster ($dir/apiserver.port,
# $dir/etcd.endpoint), until it is ready. The node has no kube-proxy, so the API server reaches
# a webhook's Service (the chart's admission webhook) at its Pods' addresses on the node's bridge
# (--enable-aggregator-routing), not its cluster IP.
start_apiserver() {
  start kube-apiserver \
    --etcd-servers="$(<"$dir/etcd.endpoint")" \
    --bind-address=127.0.0.1 --secure-port="$(<"$dir/apiserver.port")" \
    --advertise-address=127.0.0.1 --endpoint-reconciler-type=none \
    --service-cluster-ip-range=10.0.0.0/24 \
    --tls-cert-file="$pki/apiserver.crt" --tls-private-key-file="$pki/apiserver.key" \
    --client-ca-file="$pki/ca.crt" \
    --authorization-mode=RBAC \
    --service-account-issuer=https://kubernetes.default.svc.cluster.local \
    --service-account-key-file="$pki/sa.pub" \
    --service-account-signing-key-file="$pki/sa.key" \
    --kubelet-client-certificate="$pki/admin.crt" --kubelet-client-key="$pki/admin.key" \
    --kubelet-preferred-address-types=InternalIP \
    --enable-aggregator-routing=true \
    --profiling="$([[ "$apiserver_profiling" == 1 ]] && echo true || echo false)"
  wait_for 60 kube-apiserver api_get /readyz
}

# cmd_restart_apiserver [pause-seconds]: stops kube-apiserver (SIGTERM), waits, and starts it
# again with the same flags and port: what clients see of an API-server upgrade or crash.
cmd_restart_apiserver() {
  is_up || die "the cluster is not up"
  stop_components kube-apiserver
  sleep "${1:-0}"
  start_apiserver || die "kube-apiserver did not come back; see $dir/kube-apiserver.log"
  log "kube-apiserver restarted"
}

start_all() {
  local etcd_port etcd_peer_port etcd_flags=()
  [[ -z "$etcd_quota" ]] || etcd_flags+=(--quota-backend-bytes="$etcd_quota")
  etcd_port="$(free_port)"
  etcd_peer_port="$(free_port)"
  api_port="$(free_port)"
  echo "$api_port" >"$dir/apiserver.port"
  echo "http://127.0.0.1:$etcd_port" >"$dir/etcd.endpoint"

  start etcd \
    --name=poolboy --data-dir="$dir/etcd-data" \
    --listen-client-urls="http://127.0.0.1:$etcd_port" \
    --advertise-client-urls="http://127.0.0.1:$etcd_port" \
    --listen-peer-urls="http://127.0.0.1:$etcd_peer_port" \
    --initial-advertise-peer-urls="http://127.0.0.1:$etcd_peer_port" \
    --initial-cluster="poolboy=http://127.0.0.1:$etcd_peer_port" \
    --unsafe-no-fsync --log-level=warn "${etcd_flags[@]}"
  wait_for 30 etcd curl --silent --fail --max-time 2 "http://127.0.0.1:$etcd_port/health" || return 1

  start_apiserver || return 1

  write_kubeconfig "$dir/kubeconfig" admin poolboy-admin
  write_kubeconfig "$dir/controller-manager.kubeconfig" controller-manager \
    system:kube-controller-manager

  # namespace + garbage-collector: namespaces finish deleting, owner references
  # cascade; serviceaccount: every namespace gets its `default` ServiceAccount;
  # clusterrole-aggregation: the admin/edit/view ClusterRoles get their rules.
  start kube-controller-manager \
    --kubeconfig="$dir/controller-manager.kubeconfig" \
    --secure-port=0 --leader-elect=false \
    --controllers="$kcm_controllers" \
    --service-account-private-key-file="$pki/sa.key" \
    --root-ca-file="$pki/ca.crt" \
    --cluster-name=poolboy
  # The controller-manager serves nothing (--secure-port=0); it is ready when
  # the serviceaccount controller has created default/default.
  wait_for 60 kube-controller-manager api_get /api/v1/namespaces/default/serviceaccounts/default ||
    return 1

  if [[ "$node_enabled" == 1 ]]; then
    start_node || return 1
  fi
}

# deployment + replicaset: Deployments get their Pods (on the node); node-lifecycle: the
# node's not-ready taint goes once it is Ready; disruption: PDB status; endpointslice: the Pod
# addresses of a Service, where the API server calls a webhook (start_apiserver).
kcm_controllers="namespace-controller,garbage-collector-controller,serviceaccount-controller,serviceaccount-token-controller,root-ca-certificate-publisher-controller,clusterrole-aggregation-controller,deployment-controller,replicaset-controller,node-lifecycle-controller,disruption-controller,endpointslice-controller"

# shellcheck source=node.sh
source "$here/node.sh"

usage() {
  cat <<EOF
Local control plane is up (state, logs and pids in $dir):
  API server:  https://127.0.0.1:$(<"$dir/apiserver.port")
  kubeconfig:  $dir/kubeconfig
  kubectl/helm: $dir/bin/kubectl, $dir/bin/helm (same release as the server)
Try:
  kubectl --kubeconfig $dir/kubeconfig get namespaces
  export KUBECONFIG=$dir/kubeconfig PATH=$dir/bin:\$PATH
Integration tests find it on their own (override with POOLBOY_TEST_KUBECONFIG).
$(node_usage)
Stop it with: make cluster-down
EOF
}

# stop_all: the scheduler and controller-manager first (nothing new is scheduled or
# created), then the node's Pods are drained and the node stopped and cleaned up (node.sh),
# then the API server and etcd.
stop_all() {
  stop_components kube-scheduler kube-controller-manager
  if [[ "$node_enabled" == 1 || -d "$dir/node" ]]; then
    stop_node
  fi
  stop_components kube-apiserver etcd
}

# stop_components <name...>: SIGTERM, then SIGKILL after 20 s.
stop_components() {
  local name pid pids=()
  for name in "$@"; do
    if pid="$(live_pid "$name")"; then
      kill -TERM "$pid" 2>/dev/null || true
      pids+=("$name:$pid")
    fi
  done
  local entry deadline=$((SECONDS + 20))
  for entry in "${pids[@]}"; do
    name="${entry%%:*}"
    pid="${entry##*:}"
    while live_pid "$name" >/dev/null && ((SECONDS < deadline)); do sleep 0.1; done
    if live_pid "$name" >/dev/null; then
      log "$name (pid $pid) ignored SIGTERM; killing it"
      kill -KILL "$pid" 2>/dev/null || true
      while live_pid "$name" >/dev/null; do sleep 0.1; done
    fi
  done
}

cmd_up() {
  if is_up; then
    log "already up"
    usage
    return 0
  fi
  # Leftovers of a crashed or half-started cluster.
  stop_all
  rm -rf -- "$dir"

  bin_dir="$("$here/build.sh")" || die "building the control plane failed (see above)"
  [[ -x "$bin_dir/kube-apiserver" ]] || die "no kube-apiserver in $bin_dir"
  if [[ "$node_enabled" == 1 ]]; then
    "$repo/hack/node-deps.sh" || die "the node's packages are missing (see above)"
    node_bin_dir="$("$here/build.sh" --node)" || die "building the node failed (see above)"
  fi
  local started=$SECONDS attempt
  for attempt in 1 2 3; do
    mkdir -p "$dir"
    gen_pki
    # kubectl and helm of the same release, for local use.
    ln -sfn "$bin_dir" "$dir/bin"
    if start_all; then
      log "ready in $((SECONDS - started))s"
      usage
      return 0
    fi
    log "start-up attempt $attempt failed"
    stop_all
    # Keep the failed attempt's logs for the post-mortem.
    rm -rf -- "$dir.failed"
    mv -- "$dir" "$dir.failed"
  done
  die "the control plane did not start; logs are in $dir.failed/"
}

cmd_down() {
  stop_all
  rm -rf -- "$dir" "$dir.failed"
  log "down"
}

case "${1:-}" in
up) cmd_up ;;
down) cmd_down ;;
restart-apiserver) cmd_restart_apiserver "${2:-0}" ;;
status)
  if is_up; then usage; else
    log "not running"
    exit 1
  fi
  ;;
*) die "usage: $0 up|down|status|restart-apiserver [pause-seconds]" ;;
esac
