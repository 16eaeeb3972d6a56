#!/usr/bin/env bash
# up.sh: a REAL single-node Kubernetes control plane on this machine (etcd,
# kube-apiserver, kube-controller-manager, kube-scheduler, kubelet on a
# containerd of its own), so that deploy/kubernetes/*.yaml run on a real
# cluster (issue #24). Not run in CI: too slow. See docs/kubernetes.md,
# "Run on a real control plane on this machine".
#
#   deploy/kubernetes/cluster/up.sh        then: export KUBECONFIG=/tmp/k8s/etc/admin.kubeconfig
#
# Everything lives under $K8S_DIR (default /tmp/k8s): the scratch Go module
# that builds Kubernetes, bin/, etc/ (configs, kubeconfigs), pki/, data/,
# run/ (sockets, pid files) and logs/. Nothing of Kubernetes goes in the repo.
#
# What this machine is, and why the choices below:
# - cgroup v1 (hybrid), PID 1 is not systemd: kubelet and containerd use the
#   cgroupfs driver. Kubernetes v1.34 is the newest that runs on cgroup v1
#   without opting out of a deprecation (v1.35's kubelet refuses cgroup v1
#   unless failCgroupV1: false) and that still supports containerd 1.x.
# - Docker here is Debian's docker.io, which runs Debian's containerd 1.6
#   (/usr/bin/containerd). We run a SECOND containerd from the same binary
#   with its own config, socket, root and state, so Docker is untouched.
# - No registry: the sandbox (pause) image is a static C binary built here
#   into a FROM scratch image, docker save'd and imported with ctr.
# - The k8s binaries are built from the Go module proxy: k8s.io/kubernetes
#   with its staging modules replaced by their published v0.X.Y. On this
#   2-core machine, one core, niced: 84 minutes the first time on a machine
#   loaded by other test runs (load average 20-90); less on a quiet one.
set -euo pipefail

K=${K8S_DIR:-/tmp/k8s}
KVER=${K8S_VERSION:-v1.34.4}                  # k8s.io/kubernetes version
NODE=${K8S_NODE:-$(hostname | tr A-Z a-z)}
# The node's address: the kubelet and the apiserver's advertised address may
# not be loopback, so the machine's own address (traffic to it stays local).
NODE_IP=${K8S_NODE_IP:-$(ip -4 -o route get 1.1.1.1 2>/dev/null | sed -n 's/.* src \([0-9.]*\).*/\1/p')}
ETCD_PORT=${K8S_ETCD_PORT:-2379}
API_PORT=${K8S_API_PORT:-6443}
POD_CIDR=${K8S_POD_CIDR:-10.244.0.0/24}
SVC_CIDR=${K8S_SVC_CIDR:-10.96.0.0/16}
PAUSE_IMAGE=localhost/snacklab-pause:3.10
SOCK=$K/run/containerd/containerd.sock
P=$K/pki

log() { printf '%s up.sh: %s\n' "$(date +%T)" "$*"; }
t0=$(date +%s)
mkdir -p "$K"/{bin,etc/cni/net.d,pki,data,run,logs}

# ---- 1. the Kubernetes binaries (once; the long part) ---------------------
build_k8s() {
	log "building Kubernetes $KVER from the Go module proxy (one core, nice 19: 84 min on a loaded 2-core machine)"
	local m=$K/src
	mkdir -p "$m"
	cd "$m"
	go mod download -json "k8s.io/kubernetes@$KVER" >/dev/null
	# Every module k8s.io/kubernetes's go.mod replaces with ./staging/... is
	# published as k8s.io/NAME v0.MINOR.PATCH: replace it by that version.
	local stagever=v0.${KVER#v1.}
	local gomod
	gomod=$(go env GOMODCACHE)/cache/download/k8s.io/kubernetes/@v/$KVER.mod
	{
		printf 'module snacklab.local/k8sbuild\n\ngo 1.24.0\n\ngodebug default=go1.24\n\nrequire k8s.io/kubernetes %s\n\nreplace (\n' "$KVER"
		grep -E '^\s*k8s.io/\S+ => ./staging' "$gomod" | awk -v v="$stagever" '{printf "\t%s => %s %s\n", $1, $1, v}'
		printf ')\n\ntool (\n'
		for c in kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl; do
			printf '\tk8s.io/kubernetes/cmd/%s\n' "$c"
		done
		printf ')\n'
	} >go.mod
	printf 'package k8sbuild\n' >doc.go
	go mod tidy
	local minor=${KVER#v1.}; minor=${minor%%.*}
	local ld="-s -w"
	for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
		ld="$ld -X $p.gitVersion=$KVER -X $p.gitMajor=1 -X $p.gitMinor=$minor -X $p.gitTreeState=clean"
	done
	local s=$(date +%s)
	# -p 1 and nice: the machine has 2 cores and others use it.
	CGO_ENABLED=0 nice -n 19 go build -p 1 -trimpath -ldflags "$ld" -o "$K/bin/" \
		k8s.io/kubernetes/cmd/{kube-apiserver,kube-controller-manager,kube-scheduler,kubelet,kubectl}
	log "Kubernetes built in $(( ($(date +%s) - s) / 60 )) min"
	cd - >/dev/null
}
for b in kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl; do
	[[ -x $K/bin/$b ]] || { build_k8s; break; }
done

# ---- 2. Debian packages: etcd, CNI plugins (containerd, runc: Docker's) ----
if ! command -v etcd >/dev/null || [[ ! -x /usr/lib/cni/bridge ]]; then
	log "apt-get install etcd-server etcd-client containernetworking-plugins"
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
		etcd-server etcd-client containernetworking-plugins >"$K/logs/apt.log"
	docker ps >/dev/null # Docker must still answer
fi
for c in containerd containerd-shim-runc-v2 runc etcd docker openssl gcc; do
	command -v $c >/dev/null || { echo "up.sh: $c is missing" >&2; exit 1; }
done

# ---- 3. certificates and kubeconfigs (once) -------------------------------
# One CA signs everything; each component has its own identity so that RBAC
# and the Node authorizer apply as on a real cluster.
cert() { # name CN O [SANs] [extendedKeyUsage]
	local n=$1 cn=$2 o=$3 san=${4:-} eku=${5:-clientAuth}
	[[ -f $P/$n.crt ]] && return
	openssl genrsa -out "$P/$n.key" 2048 2>/dev/null
	openssl req -new -key "$P/$n.key" -subj "/CN=$cn${o:+/O=$o}" -out "$P/$n.csr"
	{
		echo "keyUsage=critical,digitalSignature,keyEncipherment"
		echo "extendedKeyUsage=$eku"
		[[ -n $san ]] && echo "subjectAltName=$san"
	} >"$P/$n.ext"
	openssl x509 -req -in "$P/$n.csr" -CA "$P/ca.crt" -CAkey "$P/ca.key" -CAcreateserial \
		-days 365 -extfile "$P/$n.ext" -out "$P/$n.crt" 2>/dev/null
}
if [[ ! -f $P/ca.crt ]]; then
	openssl genrsa -out "$P/ca.key" 2048 2>/dev/null
	openssl req -x509 -new -key "$P/ca.key" -subj "/CN=snacklab-k8s-ca" -days 365 -out "$P/ca.crt"
fi
svc_net=${SVC_CIDR%/*}; svc_ip=${svc_net%.*}.$(( ${svc_net##*.} + 1 ))  # the kubernetes Service
cert apiserver kube-apiserver "" \
	"IP:127.0.0.1,IP:$NODE_IP,IP:$svc_ip,DNS:localhost,DNS:$NODE,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local" serverAuth
cert apiserver-kubelet-client kube-apiserver-kubelet-client system:masters
cert admin kubernetes-admin system:masters
cert controller-manager system:kube-controller-manager ""
cert scheduler system:kube-scheduler ""
cert kubelet-client "system:node:$NODE" system:nodes
cert kubelet-serving "$NODE" "" "IP:$NODE_IP,IP:127.0.0.1,DNS:$NODE,DNS:localhost" serverAuth
[[ -f $P/sa.key ]] || { openssl genrsa -out "$P/sa.key" 2048 2>/dev/null; openssl rsa -in "$P/sa.key" -pubout -out "$P/sa.pub" 2>/dev/null; }

kubeconfig() { # name cert
	cat >"$K/etc/$1.kubeconfig" <<KC
apiVersion: v1
kind: Config
clusters:
- name: snacklab
  cluster: {server: "https://127.0.0.1:$API_PORT", certificate-authority: "$P/ca.crt"}
users:
- name: $2
  user: {client-certificate: "$P/$2.crt", client-key: "$P/$2.key"}
contexts:
- name: snacklab
  context: {cluster: snacklab, user: $2}
current-context: snacklab
KC
}
kubeconfig admin admin
kubeconfig controller-manager controller-manager
kubeconfig scheduler scheduler
kubeconfig kubelet kubelet-client

# ---- 4. containerd of our own, CNI, pause image ---------------------------
# Its own socket, root and state (Docker's containerd keeps its own); the
# overlayfs snapshotter (kernel overlay works here); cgroupfs (cgroup v1, no
# systemd). sandbox_image is the pause image built below, never pulled.
cat >"$K/etc/containerd.toml" <<TOML
version = 2
root = "$K/data/containerd"
state = "$K/run/containerd"
[grpc]
  address = "$SOCK"
[debug]
  address = ""
[plugins."io.containerd.internal.v1.opt"]
  path = "$K/data/containerd-opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_IMAGE"
  stream_server_address = "127.0.0.1"
  # This machine gives root no CAP_SYS_RESOURCE, so the kubelet's
  # oom_score_adj of -998 for a pod's sandbox fails in runc ("failed to
  # update /proc/self/oom_score_adj: Permission denied", seen by runc as
  # "can't get final child's PID from pipe: EOF"): keep it >= containerd's.
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
    conf_dir = "$K/etc/cni/net.d"
TOML
# A bridge without a gateway and without masquerading: a pod gets an address
# on snackk8s0 and no route off it, so nothing a pod sends leaves the node.
# The bridge plugin does NOT enforce NetworkPolicies (see docs).
cat >"$K/etc/cni/net.d/10-snacklab.conflist" <<CNI
{
  "cniVersion": "0.4.0",
  "name": "snacklab-k8s",
  "plugins": [{
    "type": "bridge", "bridge": "snackk8s0", "isGateway": false, "ipMasq": false,
    "ipam": {"type": "host-local", "ranges": [[{"subnet": "$POD_CIDR"}]], "dataDir": "$K/data/cni-ipam"}
  }]
}
CNI
# Pods resolve nothing: no DNS server is reachable from them anyway.
echo "nameserver 127.0.0.1" >"$K/etc/resolv.conf"

running() { [[ -f $K/run/$1.pid ]] && kill -0 "$(cat "$K/run/$1.pid")" 2>/dev/null; }
start() { # name command...: a background process, its own session, log in logs/
	local n=$1; shift
	if running "$n"; then log "$n already running (pid $(cat "$K/run/$n.pid"))"; return; fi
	setsid "$@" >>"$K/logs/$n.log" 2>&1 </dev/null &
	echo $! >"$K/run/$n.pid"
	log "$n started (pid $!, log $K/logs/$n.log)"
}
wait_for() { # what seconds command...
	local what=$1 secs=$2; shift 2
	for ((i = 0; i < secs; i++)); do "$@" >/dev/null 2>&1 && return; sleep 1; done
	echo "up.sh: $what not ready after ${secs}s; see $K/logs" >&2; exit 1
}
ctr_() { ctr --address "$SOCK" -n k8s.io "$@"; }

start containerd containerd --config "$K/etc/containerd.toml"
wait_for containerd 30 ctr_ version

if ! ctr_ images ls -q | grep -qx "$PAUSE_IMAGE"; then
	# The pause container: PID 1 of every pod's sandbox, reaps zombies, exits
	# on SIGINT/SIGTERM (what upstream's pause.c does). Static, FROM scratch.
	d=$K/pause; mkdir -p "$d"
	cat >"$d/pause.c" <<'C'
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>
static void die(int s) { (void)s; _exit(0); }
static void reap(int s) { (void)s; while (waitpid(-1, NULL, WNOHANG) > 0) {} }
int main(void) {
	struct sigaction a = {.sa_handler = die}, r = {.sa_handler = reap, .sa_flags = SA_NOCLDSTOP};
	sigaction(SIGINT, &a, NULL); sigaction(SIGTERM, &a, NULL); sigaction(SIGCHLD, &r, NULL);
	for (;;) pause();
}
C
	gcc -static -Os -o "$d/pause" "$d/pause.c"
	printf 'FROM scratch\nCOPY pause /pause\nUSER 65535:65535\nENTRYPOINT ["/pause"]\n' >"$d/Dockerfile"
	docker build -q -t "$PAUSE_IMAGE" "$d" >/dev/null
	docker save "$PAUSE_IMAGE" | ctr_ images import - >/dev/null
	log "pause image $PAUSE_IMAGE imported"
fi

# ---- 5. etcd, apiserver, controller-manager, scheduler --------------------
start etcd etcd --name "$NODE" --data-dir "$K/data/etcd" \
	--listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
	--listen-peer-urls "http://127.0.0.1:$((ETCD_PORT + 1))" --initial-advertise-peer-urls "http://127.0.0.1:$((ETCD_PORT + 1))" \
	--initial-cluster "$NODE=http://127.0.0.1:$((ETCD_PORT + 1))"
wait_for etcd 30 etcdctl --endpoints "127.0.0.1:$ETCD_PORT" endpoint health

start kube-apiserver "$K/bin/kube-apiserver" \
	--etcd-servers "http://127.0.0.1:$ETCD_PORT" \
	--bind-address 127.0.0.1 --secure-port "$API_PORT" --advertise-address "$NODE_IP" \
	--tls-cert-file "$P/apiserver.crt" --tls-private-key-file "$P/apiserver.key" --client-ca-file "$P/ca.crt" \
	--kubelet-client-certificate "$P/apiserver-kubelet-client.crt" --kubelet-client-key "$P/apiserver-kubelet-client.key" \
	--kubelet-preferred-address-types InternalIP \
	--service-account-issuer https://kubernetes.default.svc.cluster.local \
	--service-account-key-file "$P/sa.pub" --service-account-signing-key-file "$P/sa.key" \
	--service-cluster-ip-range "$SVC_CIDR" --authorization-mode Node,RBAC \
	--enable-admission-plugins NodeRestriction --allow-privileged=true --profiling=false
export KUBECONFIG=$K/etc/admin.kubeconfig
wait_for kube-apiserver 120 "$K/bin/kubectl" get --raw /readyz

start kube-controller-manager "$K/bin/kube-controller-manager" \
	--kubeconfig "$K/etc/controller-manager.kubeconfig" \
	--authentication-kubeconfig "$K/etc/controller-manager.kubeconfig" \
	--authorization-kubeconfig "$K/etc/controller-manager.kubeconfig" \
	--bind-address 127.0.0.1 --leader-elect=false --use-service-account-credentials \
	--root-ca-file "$P/ca.crt" --service-account-private-key-file "$P/sa.key" \
	--cluster-signing-cert-file "$P/ca.crt" --cluster-signing-key-file "$P/ca.key" --profiling=false
start kube-scheduler "$K/bin/kube-scheduler" \
	--kubeconfig "$K/etc/scheduler.kubeconfig" \
	--authentication-kubeconfig "$K/etc/scheduler.kubeconfig" \
	--authorization-kubeconfig "$K/etc/scheduler.kubeconfig" \
	--bind-address 127.0.0.1 --leader-elect=false --profiling=false

# ---- 6. the kubelet --------------------------------------------------------
# The kubelet sets vm.overcommit_memory, kernel.panic, kernel.panic_on_oops
# (and keys limits) on the host: keep the old values for down.sh.
[[ -f $K/run/sysctl.orig ]] || for s in vm.overcommit_memory kernel.panic kernel.panic_on_oops kernel.keys.root_maxkeys kernel.keys.root_maxbytes; do
	echo "$s=$(sysctl -n $s)"
done >"$K/run/sysctl.orig"
cat >"$K/etc/kubelet.yaml" <<KUBELET
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $NODE_IP
healthzBindAddress: 127.0.0.1
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: "$P/ca.crt"}
authorization: {mode: Webhook}
tlsCertFile: "$P/kubelet-serving.crt"
tlsPrivateKeyFile: "$P/kubelet-serving.key"
cgroupDriver: cgroupfs
containerRuntimeEndpoint: "unix://$SOCK"
failSwapOn: false
resolvConf: "$K/etc/resolv.conf"
podLogsDirectory: "$K/data/pod-logs"
maxPods: 30
# This machine's disk is shared: evict late, never collect images we imported.
evictionHard: {memory.available: 200Mi, nodefs.available: 5%, imagefs.available: 5%}
imageGCHighThresholdPercent: 100
KUBELET
start kubelet "$K/bin/kubelet" --config "$K/etc/kubelet.yaml" --kubeconfig "$K/etc/kubelet.kubeconfig" \
	--node-ip "$NODE_IP" --hostname-override "$NODE" --root-dir "$K/data/kubelet"
wait_for "node $NODE registered" 120 "$K/bin/kubectl" get node "$NODE"
"$K/bin/kubectl" wait --for=condition=Ready "node/$NODE" --timeout=180s >/dev/null
log "node $NODE Ready; cluster up in $(( $(date +%s) - t0 ))s"
log "export KUBECONFIG=$K/etc/admin.kubeconfig PATH=$K/bin:\$PATH"
