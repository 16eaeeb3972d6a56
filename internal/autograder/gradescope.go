package autograder

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Gradescope's autograder zip: setup.sh and run_autograder at its root
// (Gradescope unpacks it into /autograder/source, runs setup.sh there when
// it builds the image, and run_autograder, as root, for every submission).

// RootEnv overrides /autograder in the Gradescope scripts, so that a test
// (or a teacher) can run them against a directory laid out like it.
const RootEnv = "SNACKLAB_AUTOGRADER_ROOT"

// gradescopeSetup is setup.sh. It needs a network only to fetch Go when
// the zip carries none and the image has not the version the lab was
// built with, and strace (optional: the lab traces with ptrace without it).
const gradescopeSetup = `#!/usr/bin/env bash
# Written by lab autograder gradescope (snacklab, docs/grading.md).
# Gradescope runs it as root in /autograder/source when it builds the image.
set -eu
here=${SNACKLAB_AUTOGRADER_ROOT:-/autograder}/source
if [ -n "${SNACKLAB_GOROOT:-}" ]; then
	PATH="$SNACKLAB_GOROOT/bin:$PATH"
elif [ -x "$here/go/bin/go" ]; then
	PATH="$here/go/bin:$PATH"
elif ! command -v go >/dev/null || [ "$(go env GOVERSION)" != "{{GOVERSION}}" ]; then
	echo "setup: fetching {{GOVERSION}} from go.dev" >&2
	curl -fsSL "https://go.dev/dl/{{GOVERSION}}.linux-{{GOARCH}}.tar.gz" | tar -C "$here" -xz
	PATH="$here/go/bin:$PATH"
fi
export PATH GOMODCACHE="$here/gomodcache" GOTOOLCHAIN=local
if ! command -v strace >/dev/null && command -v apt-get >/dev/null; then
	(apt-get update -qq && apt-get install -y -qq strace) >&2 || echo "setup: no strace; the lab traces without it" >&2
fi
chmod 0755 "$here" "$here/bin" "$here/grade.sh" "$here/warm.sh" "$here/run_autograder"
chmod 0555 "$here/bin/lab"
"$here/warm.sh"
echo "setup: done"
`

// gradescopeRun is run_autograder: Gradescope copies it to /autograder.
const gradescopeRun = `#!/bin/sh
# Written by lab autograder gradescope (snacklab, docs/grading.md).
# Gradescope runs it as root for each submission: it grades
# /autograder/submission with lab grade --isolate pod (the lab as root, the
# judge; the submission's programs as other uids, the judged) and writes
# /autograder/results/results.json. SNACKLAB_AUTOGRADER_ROOT overrides /autograder.
root=${SNACKLAB_AUTOGRADER_ROOT:-/autograder}
mkdir -p "$root/results"
rm -f "$root/results/results.json"
exec "$root/source/grade.sh" "$root/submission" "$root/results/results.json"
`

// GradescopeFiles are the files of the zip's root that Gradescope runs.
var GradescopeFiles = []string{"setup.sh", "run_autograder"}

// Gradescope writes Gradescope's autograder zip to out: setup.sh and
// run_autograder at its root, the lab, the module cache and the grade
// script beside them. Nothing is written when a check fails.
func Gradescope(ctx context.Context, o Options, out string) error {
	if err := o.check(); err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "snacklab-gradescope-*")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if err := stageFiles(ctx, o, dir); err != nil {
		return err
	}
	if err := writeCommon(ctx, o, dir); err != nil {
		return err
	}
	goVersion, err := goEnv(ctx, o.Module, "GOVERSION")
	if err != nil {
		return err
	}
	goArch, err := goEnv(ctx, o.Module, "GOARCH")
	if err != nil {
		return err
	}
	setup := strings.NewReplacer("{{GOVERSION}}", goVersion, "{{GOARCH}}", goArch).Replace(gradescopeSetup)
	if err := writeFile(filepath.Join(dir, "setup.sh"), setup, 0o755); err != nil {
		return err
	}
	if err := writeFile(filepath.Join(dir, "run_autograder"), gradescopeRun, 0o755); err != nil {
		return err
	}
	o.logf("autograder: writing %s", out)
	return writeZipFile(out, dir)
}

// writeZipFile zips dir into path through a temporary file beside it, so
// that a failure leaves no half-written zip.
func writeZipFile(path, dir string) error {
	f, err := os.CreateTemp(filepath.Dir(path), ".autograder-*.zip")
	if err != nil {
		return fmt.Errorf("autograder: %w", err)
	}
	defer os.Remove(f.Name())
	if err := zipTree(f, dir); err != nil {
		f.Close()
		return fmt.Errorf("autograder: zip: %w", err)
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Chmod(f.Name(), 0o644); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}
