package autograder

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"snacklab/internal/grade"
)

// GradeScript is the script, at every package's root, that grades one
// submission the same way on every platform: `grade.sh SUBMISSION RESULTS`
// finds the module in SUBMISSION (its root, or its one subdirectory with a
// go.mod, as a repository uploaded whole), grades it with
// `lab grade --isolate pod` (the lab as root, the judge; the submission's
// programs as other uids, the judged; never --trusted), and copies lab
// grade's results.json to RESULTS, or not-graded.json when lab grade wrote
// none. Its lab grade's output goes to stderr, its exit code to stdout.
const GradeScript = "grade.sh"

// PointsFile holds the baked --points, when there are any.
const PointsFile = "points.txt"

// gradeSh is GradeScript. SNACKLAB_GOROOT names a Go toolchain to build
// with instead of the package's go/ or the PATH's go; TMPDIR where lab
// grade's reports go before the copy.
const gradeSh = `#!/bin/sh
# Written by lab autograder (snacklab, docs/grading.md): grades one submission.
# usage: grade.sh SUBMISSION RESULTS_JSON
set -u
here=$(cd "$(dirname "$0")" && pwd)
sub=$1
results=$2
` + goEnvSh + `# The module: the submission's root, or its one subdirectory holding go.mod.
dir=$sub
if [ ! -e "$dir/go.mod" ]; then
	set -- "$sub"/*/go.mod
	if [ $# -eq 1 ] && [ -e "$1" ]; then
		dir=$(dirname "$1")
	fi
fi
points=
if [ -f "$here/points.txt" ]; then
	points="--points=$here/points.txt"
fi
out=$(mktemp -d "${TMPDIR:-/tmp}/snacklab-grade-XXXXXX") || exit 1
# The judge is root; the submission's programs run as uids 200000 and up.
"$here/bin/lab" grade --isolate pod --jobs 1 --gocache "$here/gocache" --out "$out" $points "$dir" >&2
code=$?
echo "lab grade: exit $code"
mkdir -p "$(dirname "$results")"
set -- "$out"/*/results.json
if [ -f "$1" ]; then
	cp "$1" "$results"
else
	cp "$here/not-graded.json" "$results"
fi
rm -rf "$out"
exit 0
`

// goEnvSh puts the Go toolchain on the path (SNACKLAB_GOROOT's, else the
// package's go/, else the PATH's) and the package's module cache in the
// environment, for grade.sh and warm.sh alike.
const goEnvSh = `if [ -n "${SNACKLAB_GOROOT:-}" ]; then
	PATH="$SNACKLAB_GOROOT/bin:$PATH"
elif [ -x "$here/go/bin/go" ]; then
	PATH="$here/go/bin:$PATH"
fi
export PATH GOMODCACHE="$here/gomodcache" GOTOOLCHAIN=local
`

// warmDir is the package's warm module: a program importing every package
// from outside the module that the reference's programs import, built by
// the setup so that a submission's build finds them compiled.
const warmDir = "warm"

// writeCommon writes what every package holds besides stage's: the grade
// script, the baked points, and the warm module.
func writeCommon(ctx context.Context, o Options, dir string) error {
	if err := writeFile(filepath.Join(dir, GradeScript), gradeSh, 0o755); err != nil {
		return err
	}
	if err := writeFile(filepath.Join(dir, WarmScript), warmSh, 0o755); err != nil {
		return err
	}
	if o.Points != "" {
		spec := o.Points
		if !strings.Contains(spec, "=") {
			b, err := os.ReadFile(spec)
			if err != nil {
				return fmt.Errorf("autograder: --points: %w", err)
			}
			spec = string(b)
		}
		if err := writeFile(filepath.Join(dir, PointsFile), spec, 0o644); err != nil {
			return err
		}
	}
	return writeWarm(ctx, o.Module, filepath.Join(dir, warmDir))
}

// writeWarm writes the warm module: the reference's go.mod and go.sum and
// a main importing its programs' packages from other modules (a module's
// internal packages cannot be imported from outside it, and need not be:
// their importers compile them).
func writeWarm(ctx context.Context, module, dst string) error {
	args := append([]string{"list", "-deps", "-f", "{{if and .Module (not .Module.Main) (ne .Name \"main\")}}{{.ImportPath}}{{end}}"}, grade.Programs...)
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = module
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=-mod=readonly", "GOWORK=off")
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("autograder: listing the reference's dependencies: %w", err)
	}
	var b strings.Builder
	b.WriteString("// Package main imports the reference's dependencies, to compile them once at setup.\npackage main\n\nimport (\n")
	for _, p := range strings.Fields(string(out)) {
		if strings.Contains("/"+p+"/", "/internal/") {
			continue
		}
		fmt.Fprintf(&b, "\t_ %q\n", p)
	}
	b.WriteString(")\n\nfunc main() {}\n")
	for _, f := range []string{"go.mod", "go.sum"} {
		if err := os.MkdirAll(dst, 0o755); err != nil {
			return err
		}
		if err := copyFile(filepath.Join(module, f), filepath.Join(dst, f), 0o644); err != nil {
			return err
		}
	}
	return writeFile(filepath.Join(dst, "main.go"), b.String(), 0o644)
}

// WarmScript compiles the warm module into the package's gocache/ with a
// submission's build environment (internal/grade's buildEnv and -trimpath),
// so that its cache entries are the ones a submission's build looks up.
// Gradescope's setup.sh and PrairieLearn's Dockerfile run it.
const WarmScript = "warm.sh"

const warmSh = `#!/bin/sh
# Written by lab autograder (snacklab, docs/grading.md): compiles the
# reference's dependencies once, into gocache/, as a submission's build would.
here=$(cd "$(dirname "$0")" && pwd)
` + goEnvSh + `mkdir -p "$here/gocache"
cd "$here/warm" &&
	CGO_ENABLED=0 GOFLAGS='-mod=readonly -buildvcs=false' GOPROXY=off GOSUMDB=off GOWORK=off \
	GOCACHE="$here/gocache" go build -trimpath -o /dev/null . ||
	echo "warm.sh: warming the build cache failed; submissions' builds will start cold" >&2
`
