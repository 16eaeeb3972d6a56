package mutants

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// Rewrite applies the mutant's blocks for path to content, in order.
func (m Mutant) Rewrite(path, content string) (string, error) {
	for _, e := range m.Edits {
		if e.Path != path {
			continue
		}
		for n, b := range e.Blocks {
			switch c := strings.Count(content, b.Search); c {
			case 1:
				content = strings.Replace(content, b.Search, b.Replace, 1)
			default:
				where := "not found"
				if c > 1 {
					where = fmt.Sprintf("found %d times", c)
				}
				return "", fmt.Errorf("%s no longer applies: block %d of %s: its search text is %s in the reference (update labsteps/mutants/%s): %s",
					m.Name, n+1, e.Path, where, m.FileName(), firstLine(b.Search))
			}
		}
	}
	return content, nil
}

// firstLine is the first non-blank line of s, trimmed, for messages.
func firstLine(s string) string {
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			return strconv.Quote(l)
		}
	}
	return `""`
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
	if err := m.Apply(ctx, moduleDir, work); err != nil {
		return "", err
	}
	if err := BuildPrograms(ctx, src, bin); err != nil {
		return "", fmt.Errorf("mutant %s: %w", m.Name, err)
	}
	return bin, nil
}

// Apply copies the module at moduleDir into work/src and applies the
// mutant there.
func (m Mutant) Apply(ctx context.Context, moduleDir, work string) error {
	src := filepath.Join(work, "src")
	if err := CopyModule(moduleDir, src); err != nil {
		return fmt.Errorf("mutant %s: copy module: %w", m.Name, err)
	}
	return m.ApplyIn(src)
}

// ApplyIn applies the mutant to the module copy at src, in place.
func (m Mutant) ApplyIn(src string) error {
	for _, p := range m.Files() {
		file := filepath.Join(src, filepath.FromSlash(p))
		b, err := os.ReadFile(file)
		if err != nil {
			return fmt.Errorf("mutant %s: %w", m.Name, err)
		}
		out, err := m.Rewrite(p, string(b))
		if err != nil {
			return err
		}
		if err := os.WriteFile(file, []byte(out), 0o644); err != nil {
			return fmt.Errorf("mutant %s: %w", m.Name, err)
		}
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
//
// progs names the packages to build, of Programs; none means all of them.
func BuildPrograms(ctx context.Context, src, bin string, progs ...string) error {
	if len(progs) == 0 {
		progs = Programs
	}
	build := exec.CommandContext(ctx, "go", append([]string{"build", "-ldflags=-s -w", "-o", bin + string(filepath.Separator)}, progs...)...)
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
