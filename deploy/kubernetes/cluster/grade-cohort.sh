#!/usr/bin/env bash
# grade-cohort.sh: grades a cohort on the cluster up.sh runs, with the
# manifests of this checkout, and compares the merged grades with one
# unsharded `lab grade --trusted` of the same cohort on this host.
#
#   deploy/kubernetes/cluster/grade-cohort.sh COHORT_DIR OUT_DIR
#
# COHORT_DIR: one directory per submission (a Go module or a bin dir of
# static queuectl, sender, receiver). OUT_DIR gets:
#   k8s/        the whole results volume after the Jobs (shard-i/, merged/)
#   host/       the unsharded grading on this host
#   grade.applied.json, pods.txt, logs/  what was applied and what the pods said
#   compare.txt the comparison; the script exits 1 if the grades differ
#
# The manifests are read, not assumed: the Jobs' names, images, which claim
# is the cohort (the one mounted read-only) and which the results, where
# they are mounted, the lab's args. The ONLY changes made to the grading Job
# (in a copy; the files are untouched) are completions = --shards = the
# number of submissions (and maxFailedIndexes at most that, which the API
# requires). volumes.yaml and merge.yaml are applied as they are. Each run
# starts afresh (old Jobs, claims and volumes deleted) and leaves the
# cluster running. Not run in CI: minutes per submission.
set -euo pipefail

[[ $# -eq 2 ]] || { echo "usage: $0 COHORT_DIR OUT_DIR" >&2; exit 2; }
K=${K8S_DIR:-/tmp/k8s}
export KUBECONFIG=$K/etc/admin.kubeconfig PATH=$K/bin:$PATH
SOCK=$K/run/containerd/containerd.sock
root=$(cd "$(dirname "$0")/../../.." && pwd)
M=$root/deploy/kubernetes
cohort=$(realpath "$1")
out=$(realpath -m "$2")
log() { printf '%s grade-cohort.sh: %s\n' "$(date +%T)" "$*"; }
ctr_() { ctr --address "$SOCK" -n k8s.io "$@"; }

kubectl get --raw /readyz >/dev/null || { echo "no cluster: run deploy/kubernetes/cluster/up.sh" >&2; exit 1; }
rm -rf "$out/k8s" "$out/host" "$out/logs"
mkdir -p "$out/logs"
mapfile -t subs < <(find "$cohort" -mindepth 1 -maxdepth 1 -type d -printf '%f\n' | sort)
n=${#subs[@]}
((n > 0)) || { echo "$cohort: no submission directories" >&2; exit 2; }
log "cohort $cohort: $n submissions: ${subs[*]}"

# ---- read the manifests (kubectl parses them with the real schema) --------
# (one JSON object per document, or a List: either way an array)
objects() { kubectl create --dry-run=client -o json -f "$1" | jq -s 'map(if .kind == "List" then .items[] else . end)'; }
grade_objs=$(objects "$M/grade.yaml")
merge_objs=$(objects "$M/merge.yaml")
vol_objs=$(objects "$M/volumes.yaml")
grade_job=$(jq '[.[] | select(.kind == "Job")] | (map(select(.spec.completionMode == "Indexed")) + .)[0]' <<<"$grade_objs")
merge_job=$(jq '[.[] | select(.kind == "Job")][0]' <<<"$merge_objs")
ns=$(jq -r '.metadata.namespace // "default"' <<<"$grade_job")
gname=$(jq -r .metadata.name <<<"$grade_job")
mname=$(jq -r .metadata.name <<<"$merge_job")
# The claims the grading pod mounts, and where: the one mounted read-only is
# the cohort, the other the results (names need not say so).
mounts=$(jq -c '.spec.template.spec as $s
	| [$s.volumes[] | select(.persistentVolumeClaim) | {vol: .name, claim: .persistentVolumeClaim.claimName, ro: (.persistentVolumeClaim.readOnly // false)}] as $v
	| [$s.containers[0].volumeMounts[] as $m | $v[] | select(.vol == $m.name)
	   | {claim, path: $m.mountPath, sub: ($m.subPath // ""), ro: (.ro or ($m.readOnly // false))}]' <<<"$grade_job")
cohort_claim=$(jq -r 'map(select(.ro))[0].claim' <<<"$mounts")
cohort_mount=$(jq -r 'map(select(.ro))[0].path' <<<"$mounts")
results_claim=$(jq -r 'map(select(.ro | not))[0].claim' <<<"$mounts")
results_mount=$(jq -r 'map(select(.ro | not))[0].path' <<<"$mounts")
[[ $cohort_claim != null && $results_claim != null ]] || { echo "grade.yaml: no read-only and read-write claim mounts: $mounts" >&2; exit 1; }
log "Job $ns/$gname: cohort claim $cohort_claim at $cohort_mount, results claim $results_claim at $results_mount; merge Job $mname"

# ---- the image: built by build.sh, given to our containerd -----------------
mapfile -t images < <(jq -r '[.spec.template.spec.containers[].image] | unique | .[]' <<<"$grade_job" ; jq -r '.spec.template.spec.containers[].image' <<<"$merge_job")
mapfile -t images < <(printf '%s\n' "${images[@]}" | sort -u)
jq -r '.spec.template.spec.containers[] | select(.imagePullPolicy == "Always" or (.imagePullPolicy == null and (.image | test(":latest$|^[^:]*$")))) | "warning: \(.name) pulls \(.image) always, and there is no registry here"' <<<"$grade_job $merge_job" | sed 's/^/grade-cohort.sh: /' >&2 || true
t=$(date +%s)
(cd "$root" && deploy/image/build.sh "${images[0]}")
for img in "${images[@]}"; do
	docker save "$img" | ctr_ images import - >/dev/null
	log "image $img imported into containerd (k8s.io)"
done
build_s=$(( $(date +%s) - t ))

# ---- a fresh start: old Jobs, claims and our volumes go ---------------------
kubectl -n "$ns" delete job "$gname" "$mname" --ignore-not-found --cascade=foreground --wait --timeout=120s >/dev/null
kubectl delete -f "$M/volumes.yaml" --ignore-not-found --wait --timeout=120s >/dev/null
kubectl delete pv -l snacklab.local/hostpath=grade-cohort --wait --timeout=120s >/dev/null
rm -rf "$K/volumes"

# ---- hostPath volumes bound to the claims of volumes.yaml -------------------
# One node, so a hostPath directory is ReadWriteMany enough. Each PV copies
# its claim's size, access modes and class (none: "") and is pre-bound to it
# (claimRef), so the claims bind without a provisioner.
jq -c '.[] | select(.kind == "PersistentVolumeClaim")' <<<"$vol_objs" | while read -r pvc; do
	claim=$(jq -r .metadata.name <<<"$pvc")
	dir=$K/volumes/$claim
	mkdir -p "$dir"
	jq --arg dir "$dir" --arg ns "$ns" '{
		apiVersion: "v1", kind: "PersistentVolume",
		metadata: {name: "\(.metadata.name)-hostpath", labels: {"snacklab.local/hostpath": "grade-cohort"}},
		spec: {
			capacity: {storage: .spec.resources.requests.storage},
			accessModes: .spec.accessModes,
			storageClassName: (.spec.storageClassName // ""),
			persistentVolumeReclaimPolicy: "Retain",
			claimRef: {namespace: (.metadata.namespace // $ns), name: .metadata.name},
			hostPath: {path: $dir, type: "Directory"}}}' <<<"$pvc" | kubectl apply -f - >/dev/null
done
# The cohort, readable by anyone; the results writable by anyone: the pods'
# user is the manifest's business, and fsGroup does not apply to hostPath.
cp -a "$cohort"/. "$K/volumes/$cohort_claim/"
chmod -R a+rX "$K/volumes/$cohort_claim"
chmod 0777 "$K/volumes/$results_claim"
kubectl apply -f "$M/volumes.yaml" >/dev/null
for c in $(jq -r '.[] | select(.kind == "PersistentVolumeClaim") | .metadata.name' <<<"$vol_objs"); do
	kubectl -n "$ns" wait --for=jsonpath='{.status.phase}'=Bound "pvc/$c" --timeout=60s >/dev/null
done
log "claims bound to hostPath volumes under $K/volumes; cohort copied into $K/volumes/$cohort_claim"

# ---- grade: grade.yaml with completions = --shards = n ---------------------
shards='def shards($n): if . == null then . else
	[range(0; length) as $i | if $i > 0 and .[$i - 1] == "--shards" then "\($n)"
	  elif (.[$i] | startswith("--shards=")) then "--shards=\($n)" else .[$i] end] end;'
jq --argjson n "$n" "$shards"'
	{apiVersion: "v1", kind: "List", items: map(
	  if .kind == "Job" and .metadata.name == "'"$gname"'" then
	    .spec.completions = $n
	    | .spec.maxFailedIndexes |= (if . == null then . elif . > $n then $n else . end)
	    | .spec.template.spec.containers |= map(
	        .args |= shards($n) | .command |= shards($n)
	        | .env |= (if . == null then . else map(if .name == "SNACKLAB_SHARDS" then .value = "\($n)" else . end) end))
	  else . end)}' <<<"$grade_objs" >"$out/grade.applied.json"
t=$(date +%s)
kubectl apply -f "$out/grade.applied.json"
deadline=$(( $(jq -r '.spec.activeDeadlineSeconds // 7200' <<<"$grade_job") + 300 ))

wait_job() { # name seconds: 0 once Complete, 1 once Failed or out of time
	local end=$((SECONDS + $2)) c last=0
	while ((SECONDS < end)); do
		c=" $(kubectl -n "$ns" get job "$1" -o jsonpath='{range .status.conditions[?(@.status=="True")]}{.type} {end}') "
		[[ $c == *" Complete "* ]] && return 0
		[[ $c == *" Failed "* ]] && return 1
		if ((SECONDS - last >= 60)); then
			last=$SECONDS
			log "$1: $(kubectl -n "$ns" get pods -l job-name="$1" --no-headers 2>/dev/null | awk '{print $3}' | sort | uniq -c | xargs)"
		fi
		sleep 3
	done
	return 1
}
collect() { # job: its pods, their logs and the events, for the record
	kubectl -n "$ns" get pods -l job-name="$1" -o wide >>"$out/pods.txt" 2>&1 || true
	for p in $(kubectl -n "$ns" get pods -l job-name="$1" -o name); do
		kubectl -n "$ns" logs "$p" >"$out/logs/${p#pod/}.log" 2>&1 || true
	done
	kubectl -n "$ns" describe job "$1" >"$out/logs/$1.describe.txt" 2>&1 || true
}
ok=0; wait_job "$gname" "$deadline" || ok=$?
grade_s=$(( $(date +%s) - t ))
collect "$gname"
((ok == 0)) || { log "Job $gname did not complete in ${grade_s}s: see $out/logs"; exit 1; }
log "Job $gname complete: $n pods in ${grade_s}s"

# ---- merge: merge.yaml as it is --------------------------------------------
t=$(date +%s)
kubectl apply -f "$M/merge.yaml"
ok=0; wait_job "$mname" "$(( $(jq -r '.spec.activeDeadlineSeconds // 600' <<<"$merge_job") + 120 ))" || ok=$?
merge_s=$(( $(date +%s) - t ))
collect "$mname"
((ok == 0)) || { log "Job $mname did not complete: see $out/logs"; exit 1; }
cat "$out"/logs/"$mname"-*.log
cp -a "$K/volumes/$results_claim" "$out/k8s"
# merge.yaml's --out, under the results mount, is where the merged grades are.
merged_at=$(jq -r '.spec.template.spec.containers[0].args as $a | [range(0; $a | length) | select($a[.] == "--out") | $a[. + 1]][0]' <<<"$merge_job")
merged=$out/k8s/${merged_at#"$results_mount"/}
log "merge complete in ${merge_s}s; merged grades in $merged"

# ---- the same cohort unsharded on this host ---------------------------------
# The grading container's command and args, less the shard flags, with --out
# on this host and the cohort pattern on the host's copy of the cohort.
mapfile -t cmdargs < <(jq -r '.spec.template.spec.containers[0] | ((.command // [])[1:] + (.args // []))[]' <<<"$grade_job")
host_args=()
for ((i = 0; i < ${#cmdargs[@]}; i++)); do
	a=${cmdargs[i]}
	case $a in
	--shard | --shards) ((++i)) ;;
	--shard=* | --shards=*) ;;
	--out) host_args+=(--out "$out/host"); ((++i)) ;;
	"$cohort_mount"/*) host_args+=("$cohort/${a#"$cohort_mount"/}") ;;
	*) host_args+=("$a") ;;
	esac
done
(cd "$root" && CGO_ENABLED=0 go build -trimpath -tags nomutants -o "$out/lab" ./cmd/lab)
log "host: lab ${host_args[*]}"
t=$(date +%s)
"$out/lab" "${host_args[@]}" >"$out/logs/host.log" 2>&1
host_s=$(( $(date +%s) - t ))
log "host grading took ${host_s}s"

# ---- compare: equal byte for byte once what differs between runs is blanked
# The list is deploy/image/sim_test.go's `volatile`, plus the two places a
# path differs: the results (--out) and the cohort, pod mounts vs host dirs.
# The teacher's replay lines name the lab by the path it ran from: the pod's
# command (/usr/local/bin/lab) there, the script's copy here.
pod_lab=$(jq -r '.spec.template.spec.containers[0].command[0] // "lab"' <<<"$grade_job")
normalize() { # file: its bytes with the volatile parts blanked
	LABK="$pod_lab" LABH="$out/lab" OUTK="$results_mount/" OUTH="$out/host/" COHK="$cohort_mount/" COHH="$cohort/" perl -0pe '
		s{\Q$ENV{LABH}\E(?=\s)}{<lab>}g; s{\Q$ENV{LABK}\E(?=\s)}{<lab>}g;
		s{\Q$ENV{OUTH}\E}{<out>/}g; s{\Q$ENV{OUTK}\E(shard-[0-9]+/)?}{<out>/}g;
		s{\Q$ENV{COHH}\E}{<cohort>/}g; s{\Q$ENV{COHK}\E}{<cohort>/}g;
		s{snacklab-step[0-9]+-[0-9]+}{<v>}g;
		s{\b[0-9]{2}-(queuectl|sender|receiver)-}{<v>}g;
		s{[0-9]+ checks passed}{<v>}g;
		s{"execution_time":\s*[0-9.e+-]+}{<v>}g;
		s{"(took|duration)(_ms|_s)?":\s*[0-9.e+-]+}{<v>}g;
		s{time="[0-9.]+"}{<v>}g;
		s{timestamp="[^"]*"}{<v>}g;
		s{ *\b[0-9]+(\.[0-9]+)?\s?(ms|s)\b}{<v>}g;
		s{\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2}| UTC)?}{<v>}g;
	' "$1"
}
files() { (cd "$1" && find . -type d \( -name bin -o -name logs \) -prune -o -type f -print | sed 's,^\./,,' | sort); }
# A step that timed out on a loaded machine scores 0 whatever the sharding:
# such submissions, and the cohort tables, are compared for presence only.
timedout=$( { grep -rl --exclude-dir=bin --exclude-dir=logs --exclude=report.html TIMEOUT "$out/host" "$merged" 2>/dev/null || true; } | sed -E "s,^($out/host|$merged)/,," | { grep / || true; } | cut -d/ -f1 | sort -u | xargs)
{
	echo "unsharded ($out/host) vs merged ($merged)"
	[[ -n $timedout ]] && echo "timed out (presence only, with the cohort tables): $timedout"
	diff <(files "$out/host") <(files "$merged") && echo "same files: $(files "$out/host" | wc -l)"
	same=0 differ=0
	for f in $(comm -12 <(files "$out/host") <(files "$merged")); do
		sub=${f%%/*}
		[[ $(basename "$f") == report.html ]] && continue
		[[ -n $timedout && ($f != */* || " $timedout " == *" $sub "*) ]] && continue
		if cmp -s <(normalize "$out/host/$f") <(normalize "$merged/$f"); then
			same=$((same + 1))
		else
			differ=$((differ + 1))
			echo "--- $f differs (volatile parts blanked):"
			# (into a file, not `| head`: SIGPIPE under pipefail would end the script)
			diff <(normalize "$out/host/$f") <(normalize "$merged/$f") >"$out/diff.tmp" || true
			head -20 "$out/diff.tmp"
		fi
	done
	echo "equal after blanking: $same file(s); different: $differ file(s)"
	echo "timings: image build+import ${build_s}s, grade Job ${grade_s}s ($n pods), merge Job ${merge_s}s, unsharded host ${host_s}s"
} | tee "$out/compare.txt"
rm -f "$out/diff.tmp"
grep -q '^equal after blanking: .*different: 0 file' "$out/compare.txt" && ! grep -q '^[<>]' "$out/compare.txt"
