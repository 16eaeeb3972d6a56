#!/usr/bin/env bash
# Builds the grading image from what this host has (nothing is pulled):
#
#   deploy/image/build.sh [IMAGE]      default IMAGE: snacklab-grade:latest
#
# The base (Go toolchain + the module cache the contract's programs need) is
# tagged snacklab-grade-base:HASH of the Go version, go.sum and
# Dockerfile.base, and built only when missing; the lab goes on top. Run it
# in the snacklab module with the modules already downloaded (any earlier
# go build did). Then load IMAGE into the cluster: docs/kubernetes.md.
set -euo pipefail
cd "$(dirname "$0")/../.."
image=${1:-snacklab-grade:latest}

goroot=$(go env GOROOT)
hostcache=$(go env GOMODCACHE)
key=$( { go env GOVERSION; cat go.sum deploy/image/Dockerfile.base; } | sha256sum | cut -c1-12)
base=snacklab-grade-base:$key

tmp=$(mktemp -d)
trap 'chmod -R u+w "$tmp" 2>/dev/null; rm -rf "$tmp"' EXIT

if docker image inspect "$base" >/dev/null 2>&1; then
	echo "build.sh: base $base (cached)"
else
	echo "build.sh: base $base: Go $(go env GOVERSION) and the modules of ./cmd/{queuectl,sender,receiver}"
	ctx=$tmp/base
	mkdir -p "$ctx/root/tmp"
	chmod 1777 "$ctx/root/tmp"
	cp deploy/image/Dockerfile.base "$ctx/Dockerfile"
	# Only what the three programs import, from this host's cache, offline.
	GOMODCACHE=$ctx/modcache GOPROXY=file://$hostcache/cache/download GOSUMDB=off GOFLAGS=-mod=mod \
		go list -deps ./cmd/queuectl ./cmd/sender ./cmd/receiver >/dev/null
	tar -cf - -C "$ctx" Dockerfile root modcache \
		-C "$goroot" --exclude=./test --exclude=./api --exclude=./doc --exclude='*/testdata' \
		--transform='s,^\./,go/,' . |
		docker build -q -t "$base" - >/dev/null
fi

ctx=$tmp/lab
mkdir -p "$ctx/root/usr/local/bin" "$ctx/root/judge"
cp deploy/image/Dockerfile "$ctx/Dockerfile"
# The judge's: the lab (no mutants: their search texts are the reference),
# and /judge, where the pods mount the cohort, the results and the build
# cache, out of the judged's reach (root's alone).
CGO_ENABLED=0 go build -trimpath -buildvcs=false -tags nomutants -o "$ctx/root/usr/local/bin/lab" ./cmd/lab
chmod 0500 "$ctx/root/usr/local/bin/lab"
chmod 0700 "$ctx/root/judge"
# strace and the libraries it loads, from this host: steps 2 and 7 trace
# system calls (a grading container's image carries them the same way).
if s=$(command -v strace); then
	for f in "$s" $(ldd "$s" | grep -o '/[^ ]*'); do
		mkdir -p "$ctx/root$(dirname "$f")"
		cp -L "$f" "$ctx/root$f"
	done
else
	echo "build.sh: no strace on this host: steps 2 and 7 will fail in the pods" >&2
fi
tar -cf - -C "$ctx" --owner=0 --group=0 Dockerfile root |
	docker build -q --build-arg "BASE=$base" -t "$image" - >/dev/null
echo "build.sh: $image"
