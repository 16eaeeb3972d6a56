// Package autograder packages the lab for the platforms where teachers
// already grade — Gradescope, PrairieLearn and GitHub Classroom — so that a
// teacher goes from this repository to a working autograder in one command
// (issue #36), and on each of them the judge (the lab) stays apart from the
// judged (the submission's programs, run as other uids by the pod/local
// engine of internal/isolate), never graded --trusted.
//
// The packages hold the lab built static and without the mutants, a Go
// module cache with the reference's dependencies (grading needs no network)
// and the scripts each platform runs; the scripts grade with
// `lab grade --isolate pod` and carry its results.json to where the
// platform reads it. A part not judged stays not graded on every platform:
// no score, never a 0.
package autograder

import (
	"archive/zip"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"snacklab/internal/grade"
	"snacklab/labsteps/report"
)

// ErrUsage marks what the teacher asked wrongly (not the snacklab module,
// bad points, an --out that is not empty): nothing was written.
var ErrUsage = errors.New("autograder")

// Options says what to package: the snacklab module to build the lab and
// take the dependencies from, the points baked in, and where to log.
type Options struct {
	// Module is the root of the snacklab module (its go.mod says module
	// snacklab).
	Module string
	// Points is lab grade's --points, checked here and baked into the
	// scripts; "" grades every step with the default points.
	Points string
	// GoRoot, when set, is a Go toolchain copied into the package (its
	// go/); otherwise the platform's setup fetches the toolchain the
	// module was built with (Gradescope) or the image is given one.
	GoRoot string
	// Log receives one line per stage (building the lab, the module
	// cache, writing).
	Log io.Writer
}

func (o Options) logf(format string, args ...any) {
	if o.Log != nil {
		fmt.Fprintf(o.Log, format+"\n", args...)
	}
}

// check refuses a module that is not snacklab's and points lab grade
// would refuse, before anything is built or written.
func (o Options) check() error {
	b, err := os.ReadFile(filepath.Join(o.Module, "go.mod"))
	if err != nil {
		return usagef("%v", err)
	}
	first, _, _ := strings.Cut(string(b), "\n")
	if strings.TrimSpace(first) != "module snacklab" {
		return usagef("%s is not the snacklab module", o.Module)
	}
	if o.Points != "" {
		if _, _, err := grade.ParseScheme(o.Points); err != nil {
			return usagef("%v", err)
		}
	}
	return nil
}

// usagef is an ErrUsage saying what was wrong ("autograder: …").
func usagef(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrUsage}, args...)...)
}

// LabPath is where every package keeps the lab, relative to its root.
const LabPath = "bin/lab"

// ModCacheDir is the package's Go module cache, relative to its root.
const ModCacheDir = "gomodcache"

// stageFiles is stage; a test puts a stand-in lab there instead of a build.
var stageFiles = stage

// stage fills dir with what every platform's package holds: bin/lab
// (static, no mutants), the module cache of the reference's dependencies,
// go/ when o.GoRoot is set, and not-graded.json, the results.json of a
// grader that failed before writing one.
func stage(ctx context.Context, o Options, dir string) error {
	o.logf("autograder: building the lab: static, without the mutants (CGO_ENABLED=0 go build -tags nomutants ./cmd/lab)")
	if err := goCmd(ctx, o.Module, []string{"CGO_ENABLED=0"}, "build", "-tags", "nomutants", "-trimpath", "-o", filepath.Join(dir, LabPath), "./cmd/lab"); err != nil {
		return fmt.Errorf("autograder: building the lab: %w", err)
	}
	if err := modCache(ctx, o, filepath.Join(dir, ModCacheDir)); err != nil {
		return err
	}
	if o.GoRoot != "" {
		o.logf("autograder: copying the Go toolchain %s", o.GoRoot)
		if err := copyTree(o.GoRoot, filepath.Join(dir, "go")); err != nil {
			return fmt.Errorf("autograder: copying the Go toolchain: %w", err)
		}
	}
	f, err := os.Create(filepath.Join(dir, "not-graded.json"))
	if err != nil {
		return err
	}
	defer f.Close()
	if err := report.EncodeGradescope(f, NotGradedResults()); err != nil {
		return err
	}
	return f.Close()
}

// NotGradedResults is the results.json a package's script writes when
// lab grade wrote none (the grader itself failed): no score, and why.
func NotGradedResults() report.Gradescope {
	return report.Gradescope{NotGraded: true, Output: NotGradedText}
}

// NotGradedText is what a learner reads when the grader failed before
// judging anything.
const NotGradedText = "NOT GRADED: the grader failed before judging your submission. This is the grader's trouble, not a judgement of your code: no score is given, and a regrade will follow."

// modCache makes a Go module cache in dst holding what building the
// reference's three programs needs, taken from this machine's module cache
// as a file proxy (no network), so that a submission's build, offline
// (GOPROXY=off), finds every dependency the reference has.
func modCache(ctx context.Context, o Options, dst string) error {
	host, err := goEnv(ctx, o.Module, "GOMODCACHE")
	if err != nil {
		return err
	}
	o.logf("autograder: filling the module cache from %s (no network)", host)
	tmp, err := os.MkdirTemp("", "snacklab-autograder-bin-*")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	env := []string{"CGO_ENABLED=0", "GOMODCACHE=" + dst, "GOFLAGS=-modcacherw -mod=readonly",
		"GOPROXY=file://" + filepath.ToSlash(filepath.Join(host, "cache", "download")), "GOSUMDB=off", "GOTOOLCHAIN=local", "GOWORK=off"}
	if err := goCmd(ctx, o.Module, env, "build", "-o", tmp+"/", "./cmd/queuectl", "./cmd/sender", "./cmd/receiver"); err != nil {
		return fmt.Errorf("autograder: the module cache (run go mod download once where there is a network): %w", err)
	}
	// The checksum database's cache and version control checkouts are
	// not needed offline, nor the modules' zips once extracted (a build
	// reads the extracted tree and the .ziphash beside the zip): about
	// 40 MiB of the package.
	for _, d := range []string{"cache/download/sumdb", "cache/vcs"} {
		if err := os.RemoveAll(filepath.Join(dst, d)); err != nil {
			return err
		}
	}
	return filepath.WalkDir(filepath.Join(dst, "cache", "download"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() && strings.HasSuffix(p, ".zip") {
			err = os.Remove(p)
		}
		return err
	})
}

func goEnv(ctx context.Context, module, name string) (string, error) {
	cmd := exec.CommandContext(ctx, "go", "env", name)
	cmd.Dir = module
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("autograder: go env %s: %w", name, err)
	}
	return strings.TrimSpace(string(out)), nil
}

func goCmd(ctx context.Context, dir string, env []string, args ...string) error {
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return nil
}

// copyTree copies the regular files and directories of src into dst with
// their modes; links are copied as links.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		to := filepath.Join(dst, rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			return os.MkdirAll(to, info.Mode().Perm()|0o700)
		case d.Type()&fs.ModeSymlink != 0:
			l, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(l, to)
		case d.Type().IsRegular():
			return copyFile(p, to, info.Mode().Perm())
		}
		return nil
	})
}

func copyFile(src, dst string, mode fs.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// writeFile writes a package's file, making its directory.
func writeFile(path, content string, mode fs.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, []byte(content), mode)
}

// zipTree writes the tree at dir as a zip to w: every directory and
// regular file at its path relative to dir, with its mode (setup.sh and
// run_autograder must stay executable), links as links.
func zipTree(w io.Writer, dir string) error {
	zw := zip.NewWriter(w)
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		info, err := d.Info()
		if err != nil {
			return err
		}
		h, err := zip.FileInfoHeader(info)
		if err != nil {
			return err
		}
		h.Name = filepath.ToSlash(rel)
		if d.IsDir() {
			h.Name += "/"
			_, err := zw.CreateHeader(h)
			return err
		}
		h.Method = zip.Deflate
		fw, err := zw.CreateHeader(h)
		if err != nil {
			return err
		}
		if d.Type()&fs.ModeSymlink != 0 {
			l, err := os.Readlink(p)
			if err != nil {
				return err
			}
			_, err = io.WriteString(fw, l)
			return err
		}
		if !d.Type().IsRegular() {
			return fmt.Errorf("%s: not a regular file", p)
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.Copy(fw, f)
		return err
	})
	if err != nil {
		return err
	}
	return zw.Close()
}

// checkDirOut refuses an --out directory that exists and is not empty, so
// that a package never mixes with what was there.
func checkDirOut(dir string) error {
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return usagef("--out %s: %v", dir, err)
	case len(entries) > 0:
		return usagef("--out %s is not empty; nothing written", dir)
	}
	return nil
}
