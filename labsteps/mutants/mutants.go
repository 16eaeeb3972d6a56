// Package mutants keeps the lab's wrong answers: small patches against the
// reference, each a single bug that a named lab step must reject. A lab that
// passes the reference and fails every mutant has shown that its checks bite
// ("wheats and chaffs").
//
// Each NAME.patch is a unified diff (git apply -p1) against the reference as
// it is in this repository (solution markers and all), preceded by comment
// lines:
//
//	# One sentence: what the wrong answer does.
//	# step: N
//
// where N is the step that must reject it; several steps are written
// "# step: 3, 7". A wrong answer that only a crash at the right moment
// exposes names the programs `lab crash` must catch it in instead (or as
// well): "# crash: receiver" (several: "# crash: enqueue, finish"); such a
// patch needs no "# step:" line. Build copies the module, applies one patch and builds the
// three executables of the contract, so the lab can be run against them with
// --bin. `lab selftest` builds and grades them all (docs/selftest.md).
//
// The patches are embedded by patches.go. A learner's starter copy leaves
// out that file and the patches, whose context lines are the reference
// solution; there All returns ErrNoPatches.
package mutants

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// patches holds the NAME.patch files; nil in a learner's copy.
var patches fs.FS

// ErrNoPatches means this copy of the module has no mutants: a learner's
// starter copy leaves them out.
var ErrNoPatches = errors.New("no mutants in this copy of the module (a learner's starter copy leaves them out)")

// Mutant is one wrong answer.
type Mutant struct {
	Name    string // file name without .patch
	Comment string // the one-sentence description
	Steps   []int  // the lab steps that must each reject it, in order
	Step    int    // Steps[0]; 0 when none
	// Crash lists the programs of `lab crash` (internal/crash.Programs)
	// whose crash-point enumeration must report a violation.
	Crash []string
	Patch []byte
}

// Available reports whether this copy of the module has the mutants.
func Available() bool { return patches != nil }

// All lists the mutants, by name.
func All() ([]Mutant, error) {
	if patches == nil {
		return nil, ErrNoPatches
	}
	names, err := fs.Glob(patches, "*.patch")
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	var out []Mutant
	for _, n := range names {
		b, err := fs.ReadFile(patches, n)
		if err != nil {
			return nil, err
		}
		m, err := Parse(strings.TrimSuffix(n, ".patch"), b)
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, nil
}

// Parse reads a patch's comment header.
func Parse(name string, patch []byte) (Mutant, error) {
	m := Mutant{Name: name, Patch: patch}
	sc := bufio.NewScanner(bytes.NewReader(patch))
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "#")
		if !ok {
			break
		}
		line = strings.TrimSpace(line)
		if v, ok := strings.CutPrefix(line, "step:"); ok {
			for _, f := range strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == ' ' }) {
				n, err := strconv.Atoi(f)
				if err != nil {
					return m, fmt.Errorf("mutant %s: step %q: %v", name, strings.TrimSpace(v), err)
				}
				if slices.Contains(m.Steps, n) {
					return m, fmt.Errorf("mutant %s: step %d named twice", name, n)
				}
				m.Steps = append(m.Steps, n)
			}
			if len(m.Steps) == 0 {
				return m, fmt.Errorf("mutant %s: \"# step:\" names no step", name)
			}
		} else if v, ok := strings.CutPrefix(line, "crash:"); ok {
			for _, f := range strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == ' ' }) {
				if !slices.Contains(CrashPrograms, f) {
					return m, fmt.Errorf("mutant %s: crash: %q is not one of %s", name, f, strings.Join(CrashPrograms, ", "))
				}
				if slices.Contains(m.Crash, f) {
					return m, fmt.Errorf("mutant %s: crash program %s named twice", name, f)
				}
				m.Crash = append(m.Crash, f)
			}
			if len(m.Crash) == 0 {
				return m, fmt.Errorf("mutant %s: \"# crash:\" names no program", name)
			}
		} else if m.Comment == "" {
			m.Comment = line
		}
	}
	if m.Comment == "" || len(m.Steps) == 0 && len(m.Crash) == 0 {
		return m, fmt.Errorf("mutant %s: want a header of \"# one sentence\" and \"# step: N\" (or \"# crash: PROGRAM\")", name)
	}
	if len(m.Steps) > 0 {
		m.Step = m.Steps[0]
	}
	return m, nil
}

// CrashPrograms are the programs a "# crash:" line may name: those of
// internal/crash, whose order story kills each at every crash point
// (repeated here: that package imports the lab's, not the reverse).
var CrashPrograms = []string{"enqueue", "sender", "receiver", "redrive", "finish"}

// ModuleRoot finds the directory holding go.mod, from dir upwards.
func ModuleRoot(dir string) (string, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod found")
		}
		dir = parent
	}
}

// Programs are the packages Build builds into the bin dir.
var Programs = []string{"./cmd/queuectl", "./cmd/sender", "./cmd/receiver"}

// Build copies the module at moduleDir into work/src, applies the mutant's
// patch there and builds static executables into work/bin, which it returns.
func (m Mutant) Build(ctx context.Context, moduleDir, work string) (string, error) {
	src, bin := filepath.Join(work, "src"), filepath.Join(work, "bin")
	if err := m.Apply(ctx, moduleDir, work); err != nil {
		return "", err
	}
	if err := BuildPrograms(ctx, src, bin); err != nil {
		return "", fmt.Errorf("mutant %s: %w", m.Name, err)
	}
	return bin, nil
}

// Apply copies the module at moduleDir into work/src and applies the
// mutant's patch there.
func (m Mutant) Apply(ctx context.Context, moduleDir, work string) error {
	src := filepath.Join(work, "src")
	if err := CopyModule(moduleDir, src); err != nil {
		return fmt.Errorf("mutant %s: copy module: %w", m.Name, err)
	}
	patch := filepath.Join(work, m.Name+".patch")
	if err := os.WriteFile(patch, m.Patch, 0o644); err != nil {
		return err
	}
	// --recount: the hunk headers' line counts need not be exact, so a patch
	// can be edited by hand; the context lines must still match exactly.
	apply := exec.CommandContext(ctx, "git", "apply", "-p1", "--recount", "--whitespace=nowarn", patch)
	apply.Dir = src
	if out, err := apply.CombinedOutput(); err != nil {
		return fmt.Errorf("mutant %s no longer applies to the reference (regenerate labsteps/mutants/%s.patch): %v: %s",
			m.Name, m.Name, err, out)
	}
	return nil
}

// BuildPrograms builds the contract's three executables from the module at
// src into bin, static (CGO_ENABLED=0) like run-lab.sh, so that the
// dependencies come from the build cache that run-lab.sh (or any earlier
// build) filled. Linking is most of such a build, and -s -w (no symbol
// table, no DWARF) makes it about 40% faster; stack traces still name
// functions, files and lines. (-trimpath would not help: the dependencies
// would be compiled once more, 45 s on a 2-core machine.)
func BuildPrograms(ctx context.Context, src, bin string) error {
	build := exec.CommandContext(ctx, "go", append([]string{"build", "-ldflags=-s -w", "-o", bin + string(filepath.Separator)}, Programs...)...)
	build.Dir = src
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("build: %v: %s", err, out)
	}
	return nil
}

// CopyModule copies the Go sources and module files, skipping .git, bin,
// built executables lying around (a stray `go build` output at the root is
// 20 MB, times one copy per mutant) and anything else not needed to build.
func CopyModule(from, to string) error {
	return filepath.WalkDir(from, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(from, path)
		if err != nil {
			return err
		}
		if d.IsDir() {
			if rel != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "bin" || d.Name() == "testdata" || d.Name() == "node_modules") {
				return filepath.SkipDir
			}
			return os.MkdirAll(filepath.Join(to, rel), 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if bytes.HasPrefix(b, []byte("\x7fELF")) {
			return nil
		}
		return os.WriteFile(filepath.Join(to, rel), b, 0o644)
	})
}
