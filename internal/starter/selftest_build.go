package starter

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"
	"golang.org/x/sync/semaphore"

	"snacklab/labsteps/mutants"
)

// buildAndGrade builds the reference, then the other targets at most
// cfg.Builds at once, and grades each as it is built, at most cfg.Labs
// steps at once: a mutant's run of one step takes one of the cfg.Labs
// slots, a run of all eight steps (the reference, a variant) takes eight,
// so eight variants never run 64 steps at once on a machine sized for
// eight. (Under that load a receiver bounding its clients at one second,
// as the contract allows, cut the lab's requests.)
func buildAndGrade(ctx context.Context, cfg SelftestConfig, work string, all []mutants.Mutant, ref *target, others []*target) error {
	built := make(chan *target, len(others)+1)
	total := len(others) + 1
	var graders sync.WaitGroup
	var graded atomic.Int32
	slots := semaphore.NewWeighted(int64(cfg.Labs))
	for range cfg.Labs {
		graders.Go(func() {
			for t := range built {
				weight := int64(min(max(len(t.run), 1), cfg.Labs))
				if err := slots.Acquire(ctx, weight); err != nil {
					t.out.Error = err.Error()
					continue
				}
				t1 := time.Now()
				gradeTarget(ctx, cfg, t, filepath.Join(work, t.out.Name), all)
				t.out.LabS = time.Since(t1).Seconds()
				slots.Release(weight)
				cfg.Progress("selftest: [%d/%d] graded %-28s %s (%.1fs)", graded.Add(1), total, t.out.Name, verdict(*t.out), t.out.LabS)
			}
		})
	}
	buildOne := func(t *target) {
		t1 := time.Now()
		bin, err := t.build(ctx, filepath.Join(work, t.out.Name))
		t.out.BuildS = time.Since(t1).Seconds()
		if err != nil {
			t.out.Error = "build: " + err.Error()
			cfg.Progress("selftest: %s did not build: %v", t.out.Name, err)
			return
		}
		cfg.Progress("selftest: built %-30s (%.1fs)", t.out.Name, t.out.BuildS)
		t.bin = bin
		built <- t
	}
	// The mutants take the reference's executables for the programs they
	// do not change, so it is built before them.
	buildOne(ref)
	var g errgroup.Group
	g.SetLimit(cfg.Builds)
	for _, t := range others {
		g.Go(func() error {
			if err := ctx.Err(); err != nil {
				return err
			}
			if ref.bin == "" && (t.out.Kind == KindMutant || t.out.Kind == KindVariant) {
				t.out.Error = "build: not built: the reference did not build"
				return nil
			}
			buildOne(t)
			return nil
		})
	}
	gerr := g.Wait()
	close(built)
	graders.Wait()
	if gerr != nil {
		return gerr
	}
	return ctx.Err()
}

func build(ctx context.Context, src, dir string) (string, error) {
	bin := filepath.Join(dir, "bin")
	return bin, mutants.BuildPrograms(ctx, src, bin)
}

// buildMutant applies m to a copy of the module and builds the programs
// whose files it edits; the others are the reference's executables in
// refBin, linked (or copied) beside them. Building three programs is mostly
// three links, so a mutant of the receiver costs one.
func buildMutant(ctx context.Context, module, dir string, m mutants.Mutant, files programFiles, refBin string) (string, error) {
	progs := files.touchedBy(m.Files())
	if len(progs) == 0 {
		return "", fmt.Errorf("mutant %s edits %s, from which no program of the contract is built: it is the reference",
			m.Name, strings.Join(m.Files(), ", "))
	}
	if err := m.Apply(ctx, module, dir); err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "bin")
	if err := mutants.BuildPrograms(ctx, filepath.Join(dir, "src"), bin, progs...); err != nil {
		return "", fmt.Errorf("mutant %s: %w", m.Name, err)
	}
	for _, p := range mutants.Programs {
		if slices.Contains(progs, p) {
			continue
		}
		name := path.Base(p)
		if err := linkOrCopy(filepath.Join(refBin, name), filepath.Join(bin, name)); err != nil {
			return "", err
		}
	}
	return bin, nil
}

// linkOrCopy makes dst the same executable as src.
func linkOrCopy(src, dst string) error {
	if os.Link(src, dst) == nil {
		return nil
	}
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, b, 0o755)
}

// programFiles maps each program of the contract (mutants.Programs) to the
// module's files its build reads: the Go and embedded files of every
// package of the module it imports, as slash paths from the module root.
type programFiles map[string]map[string]bool

// listProgramFiles asks the go command which files each program is built from.
func listProgramFiles(ctx context.Context, module string) (programFiles, error) {
	out := programFiles{}
	for _, prog := range mutants.Programs {
		cmd := exec.CommandContext(ctx, "go", "list", "-deps", "-json=Dir,GoFiles,EmbedFiles,Module", prog)
		cmd.Dir = module
		b, err := cmd.Output()
		if err != nil {
			return nil, fmt.Errorf("go list -deps %s: %w", prog, err)
		}
		set := map[string]bool{}
		dec := json.NewDecoder(bytes.NewReader(b))
		for {
			var pkg struct {
				Dir                 string
				GoFiles, EmbedFiles []string
				Module              *struct{ Dir string }
			}
			if err := dec.Decode(&pkg); err == io.EOF {
				break
			} else if err != nil {
				return nil, fmt.Errorf("go list -deps %s: %w", prog, err)
			}
			if pkg.Module == nil || pkg.Module.Dir != module {
				continue
			}
			for _, f := range append(pkg.GoFiles, pkg.EmbedFiles...) {
				rel, err := filepath.Rel(module, filepath.Join(pkg.Dir, f))
				if err != nil {
					return nil, err
				}
				set[filepath.ToSlash(rel)] = true
			}
		}
		out[prog] = set
	}
	return out, nil
}

// touchedBy lists the programs built from any of files, in mutants.Programs' order.
func (pf programFiles) touchedBy(files []string) []string {
	var progs []string
	for _, p := range mutants.Programs {
		for _, f := range files {
			if pf[p][f] {
				progs = append(progs, p)
				break
			}
		}
	}
	return progs
}
