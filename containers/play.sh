#!/usr/bin/env bash
# Plays lab step 8 across containers with compose.yaml: sender A exits 73
# right after the receiver committed its order, sender B reclaims the job with
# token 2 once the lease has ended, and the verifier checks stock +7 once, the
# job done, and a late finish with token 1 refused (queuectl exit 12).
#
#   containers/play.sh                   the reference implementation
#   SNACKLAB_BIN=DIR containers/play.sh  DIR's static queuectl, sender, receiver
#
# Exits 0 only when the verifier is satisfied and Docker reports that A
# exited 73. Builds the binaries on the host (CGO_ENABLED=0) and the FROM
# scratch image from them: nothing is pulled. Leaves only the image behind
# (SNACKLAB_IMAGE, default snacklab:local); containers, network and volumes
# are removed. See docs/containers.md.
set -euo pipefail
cd "$(dirname "$0")/.."

export COMPOSE_PROJECT_NAME=${COMPOSE_PROJECT_NAME:-snacklab}
export SNACKLAB_IMAGE=${SNACKLAB_IMAGE:-snacklab:local}
project=$COMPOSE_PROJECT_NAME

if docker compose version >/dev/null 2>&1; then
	compose=(docker compose)
elif command -v docker-compose >/dev/null 2>&1; then
	compose=(docker-compose)
else
	echo "play: needs 'docker compose' or 'docker-compose'" >&2
	exit 2
fi

ctx=$(mktemp -d)
cleanup() {
	"${compose[@]}" down -v --remove-orphans >/dev/null 2>&1 || true
	rm -rf "$ctx"
}
trap cleanup EXIT
say() { printf '\n== %s\n' "$*"; }

say "build: static binaries on the host, FROM scratch image $SNACKLAB_IMAGE"
mkdir -p "$ctx/bin" "$ctx/root/queue" "$ctx/root/data" "$ctx/root/tmp"
cp containers/Dockerfile "$ctx/"
build=(./containers/verify)
if [ -n "${SNACKLAB_BIN:-}" ]; then
	for b in queuectl sender receiver; do
		install -m 0755 "$SNACKLAB_BIN/$b" "$ctx/bin/$b"
	done
else
	build+=(./cmd/queuectl ./cmd/sender ./cmd/receiver)
fi
CGO_ENABLED=0 GOOS=linux go build -trimpath -buildvcs=false -ldflags='-s -w' -o "$ctx/bin/" "${build[@]}"
# The classic builder: it needs no buildx plugin, and this Dockerfile only
# copies files. An image the tag leaves behind is removed if nothing uses it.
old=$(docker image inspect -f '{{.Id}}' "$SNACKLAB_IMAGE" 2>/dev/null || true)
DOCKER_BUILDKIT=0 docker build -q -t "$SNACKLAB_IMAGE" "$ctx" >/dev/null 2>&1 ||
	DOCKER_BUILDKIT=0 docker build -t "$SNACKLAB_IMAGE" "$ctx"
new=$(docker image inspect -f '{{.Id}}' "$SNACKLAB_IMAGE")
if [ -n "$old" ] && [ "$old" != "$new" ]; then
	docker rmi "$old" >/dev/null 2>&1 || true
fi

# A fresh queue and receiver every time.
"${compose[@]}" down -v --remove-orphans >/dev/null 2>&1 || true

say "play: ${compose[*]} run --rm verify (brings up the chain in compose.yaml)"
start=$(date +%s%N)
set +e
"${compose[@]}" run --rm -T verify
verified=$?
set -e
elapsed_ms=$((($(date +%s%N) - start) / 1000000))

container_of() {
	docker ps -aq --filter "label=com.docker.compose.project=$project" \
		--filter "label=com.docker.compose.service=$1" --filter "label=com.docker.compose.oneoff=False" | head -n1
}
exit_of() {
	local id
	id=$(container_of "$1")
	if [ -z "$id" ]; then echo "none"; else docker inspect -f '{{if .State.Running}}running{{else}}{{.State.ExitCode}}{{end}}' "$id"; fi
}

say "what each container printed"
for s in receiver sender-a lease-expiry sender-b; do
	id=$(container_of "$s")
	[ -n "$id" ] || continue
	echo "-- $s ($(exit_of "$s" | sed 's/^[0-9]/exit &/'))"
	docker logs "$id" 2>&1 | sed 's/^/   /'
done

a=$(exit_of sender-a)
b=$(exit_of sender-b)
say "judgement"
ok=1
check() { # what expected observed
	if [ "$2" = "$3" ]; then echo "ok   $1: expected $2, observed $3"; else echo "FAIL $1: expected $2, observed $3"; ok=0; fi
}
check "sender-a exit code (Docker State.ExitCode; exits after the receipt, before finish)" 73 "$a"
check "sender-b exit code (reclaims with token 2 and finishes ok)" 0 "$b"
check "verify exit code (stock +7 once, job done, late token 1 refused)" 0 "$verified"
echo "played in ${elapsed_ms} ms"
if [ "$ok" = 1 ]; then
	echo "PASS: the crash-after-receipt scenario holds across containers"
	exit 0
fi
echo "FAIL: see the lines marked FAIL above"
exit 1
