// Package mutants keeps the lab's wrong answers: small patches against the
// reference, each a single bug that a named lab step must reject. A lab that
// passes the reference and fails every mutant has shown that its checks bite
// ("wheats and chaffs").
//
// Each NAME.patch is a unified diff (git apply -p1) preceded by comment lines:
//
//	# One sentence: what the wrong answer does.
//	# step: N
//
// Build copies the module, applies one patch and builds the three executables
// of the contract, so the lab can be run against them with --bin.
package mutants

import (
	"bufio"
	"bytes"
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

//go:embed *.patch
var patches embed.FS

// Mutant is one wrong answer.
type Mutant struct {
	Name    string // file name without .patch
	Comment string // the one-sentence description
	Step    int    // the lab step that must reject it
	Patch   []byte
}

// All lists the mutants, by name.
func All() ([]Mutant, error) {
	names, err := fs.Glob(patches, "*.patch")
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	var out []Mutant
	for _, n := range names {
		b, err := patches.ReadFile(n)
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
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil {
				return m, fmt.Errorf("mutant %s: step %q: %v", name, v, err)
			}
			m.Step = n
		} else if m.Comment == "" {
			m.Comment = line
		}
	}
	if m.Comment == "" || m.Step == 0 {
		return m, fmt.Errorf("mutant %s: want a header of \"# one sentence\" and \"# step: N\"", name)
	}
	return m, nil
}

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
	if err := copyModule(moduleDir, src); err != nil {
		return "", fmt.Errorf("mutant %s: copy module: %w", m.Name, err)
	}
	patch := filepath.Join(work, m.Name+".patch")
	if err := os.WriteFile(patch, m.Patch, 0o644); err != nil {
		return "", err
	}
	apply := exec.CommandContext(ctx, "git", "apply", "-p1", "--whitespace=nowarn", patch)
	apply.Dir = src
	if out, err := apply.CombinedOutput(); err != nil {
		return "", fmt.Errorf("mutant %s no longer applies to the reference (regenerate labsteps/mutants/%s.patch): %v: %s",
			m.Name, m.Name, err, out)
	}
	build := exec.CommandContext(ctx, "go", append([]string{"build", "-o", bin + string(filepath.Separator)}, Programs...)...)
	build.Dir = src
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("mutant %s: build: %v: %s", m.Name, err, out)
	}
	return bin, nil
}

// copyModule copies the Go sources and module files, skipping .git, bin and
// anything that is not needed to build.
func copyModule(from, to string) error {
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
		return os.WriteFile(filepath.Join(to, rel), b, 0o644)
	})
}
