#!/usr/bin/env bash
# down.sh: tears down what up.sh started: the pods (through the kubelet while
# it still runs, so CNI releases their addresses and network namespaces),
# kubelet, scheduler, controller-manager, apiserver, etcd, the containers
# left in our containerd, our containerd, its mounts, the pod bridge, and the
# kernel settings the kubelet changed. Keeps $K8S_DIR/bin (an hour to build),
# src, pki and logs; removes data/ and run/ (etcd, containerd and kubelet
# state), so the next up.sh starts a fresh cluster.
#
#   deploy/kubernetes/cluster/down.sh
#
# Only processes whose pid up.sh recorded are stopped; Docker and its own
# containerd are not touched.
set -euo pipefail

K=${K8S_DIR:-/tmp/k8s}
SOCK=$K/run/containerd/containerd.sock
export KUBECONFIG=$K/etc/admin.kubeconfig
log() { printf '%s down.sh: %s\n' "$(date +%T)" "$*"; }
running() { [[ -f $K/run/$1.pid ]] && kill -0 "$(cat "$K/run/$1.pid")" 2>/dev/null; }
stop() { # name: SIGTERM, then SIGKILL after 20 s
	running "$1" || { rm -f "$K/run/$1.pid"; return 0; }
	local pid
	pid=$(cat "$K/run/$1.pid")
	kill "$pid"
	for ((i = 0; i < 20; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
	kill -0 "$pid" 2>/dev/null && kill -KILL "$pid"
	rm -f "$K/run/$1.pid"
	log "$1 (pid $pid) stopped"
}
ctr_() { ctr --address "$SOCK" -n k8s.io "$@"; }

# 1. Pods first, while the apiserver and kubelet run: Jobs, then every pod.
if running kube-apiserver && running kubelet; then
	"$K/bin/kubectl" delete jobs --all -A --wait=false >/dev/null 2>&1 || true
	"$K/bin/kubectl" delete pods --all -A --grace-period=5 --timeout=90s >/dev/null 2>&1 || true
	log "pods deleted"
fi

# 2. The control plane and the kubelet.
for p in kubelet kube-scheduler kube-controller-manager kube-apiserver etcd; do stop "$p"; done

# 3. Containers left in our containerd (the kubelet gone, ctr removes them);
#    remember their network namespaces, which only a CNI DEL would remove.
netns=()
if running containerd; then
	for c in $(ctr_ containers ls -q); do
		ns=$(ctr_ containers info "$c" 2>/dev/null | jq -r '.Spec.linux.namespaces[]? | select(.type=="network") | .path // empty' || true)
		[[ -n $ns ]] && netns+=("$ns")
		ctr_ tasks kill -s SIGKILL "$c" >/dev/null 2>&1 || true
	done
	sleep 2
	for c in $(ctr_ containers ls -q); do
		ctr_ tasks delete -f "$c" >/dev/null 2>&1 || true
		ctr_ containers delete "$c" >/dev/null 2>&1 || true
	done
fi
stop containerd

# 4. Mounts under $K (container rootfs, kubelet volumes), deepest first, and
#    the pods' network namespaces (a pod's veth goes with its namespace).
grep -F " $K/" /proc/self/mountinfo | awk '{print $5}' | sort -r | while read -r m; do
	umount -l "$m" 2>/dev/null && log "unmounted $m" || true
done
for ns in "${netns[@]}"; do
	[[ $ns == /var/run/netns/* || $ns == /run/netns/* ]] || continue
	umount "$ns" 2>/dev/null || true
	rm -f "$ns"
	log "removed network namespace $ns"
done

# 5. The pod bridge.
if ip link show snackk8s0 >/dev/null 2>&1; then ip link del snackk8s0 && log "bridge snackk8s0 removed"; fi

# 5b. The iptables chains the kubelet made (KUBE-FIREWALL drops packets to
#     127.0.0.0/8 that do not come from it; the canaries watch for flushes).
for ipt in iptables ip6tables; do
	command -v $ipt >/dev/null || continue
	while $ipt -D INPUT -j KUBE-FIREWALL 2>/dev/null; do :; done
	while $ipt -D OUTPUT -j KUBE-FIREWALL 2>/dev/null; do :; done
	for t in filter nat mangle; do
		for ch in KUBE-FIREWALL KUBE-KUBELET-CANARY; do
			$ipt -t $t -F $ch 2>/dev/null && $ipt -t $t -X $ch 2>/dev/null || true
		done
	done
done

# 6. The kernel settings the kubelet changed, back to what they were.
if [[ -f $K/run/sysctl.orig ]]; then
	while IFS= read -r kv; do sysctl -q -w "$kv" >/dev/null || true; done <"$K/run/sysctl.orig"
	log "sysctls restored: $(tr '\n' ' ' <"$K/run/sysctl.orig")"
fi

# 7. State.
rm -rf "$K/data" "$K/run" "$K/volumes"
log "done (kept $K/bin, src, pki, logs)"
