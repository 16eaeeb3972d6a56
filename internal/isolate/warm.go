package isolate

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// WarmFunc returns a grade.Boundary's Warm: it fills goCache with a trusted
// build before any submission's, in a build container like theirs (same
// mounts, flags and user, so the cache entries are the ones their builds
// look up). What it builds is a program that imports every library package
// the programs of module (the reference, which the grader trusts) use, the
// SQLite driver above all: the long part of a cold build, and the same for
// every submission made from the learner's copy. So no submission's build
// waits on a classmate's, and none starts cold.
func (e *Engine) WarmFunc(module, goCache string, limits Limits, timeout time.Duration) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		src, err := os.MkdirTemp("", "snacklab-warm-*")
		if err != nil {
			return err
		}
		defer os.RemoveAll(src)
		if err := writeWarmModule(ctx, module, src); err != nil {
			return fmt.Errorf("warm the build cache: %w", err)
		}
		r, err := e.Build(ctx, BuildOptions{Src: src, Out: filepath.Join(src, "out"), Name: "warm",
			Packages: []string{"./cmd/warm"}, Timeout: timeout, GoCache: goCache, Limits: limits})
		if err != nil {
			return fmt.Errorf("warm the build cache: %w", err)
		}
		if r.Failure != "" {
			return fmt.Errorf("warm the build cache: %s: %s", r.Failure, r.Output)
		}
		return nil
	}
}

// writeWarmModule writes into dir a module with module's go.mod and go.sum
// and one program, cmd/warm, importing every package outside the module
// that module's programs depend on (but those no other module may import).
func writeWarmModule(ctx context.Context, module, dir string) error {
	args := []string{"list", "-deps", "-f", `{{if ne .Name "main"}}{{.ImportPath}}{{end}}`}
	args = append(args, buildPackages()...)
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = module
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=-mod=readonly", "GOWORK=off")
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("go list -deps in %s: %w", module, err)
	}
	var main strings.Builder
	main.WriteString("// Command warm imports what the reference's programs import, to fill a build cache.\npackage main\n\nimport (\n")
	n := 0
	for _, p := range strings.Fields(string(out)) {
		first, _, _ := strings.Cut(p, "/")
		if first == "snacklab" || p == "C" || p == "unsafe" || first == "internal" || first == "vendor" ||
			strings.Contains(p, "/internal/") || strings.HasSuffix(p, "/internal") || strings.Contains(p, "/vendor/") {
			continue
		}
		fmt.Fprintf(&main, "\t_ %q\n", p)
		n++
	}
	if n == 0 {
		return fmt.Errorf("go list -deps in %s named no package outside the module", module)
	}
	main.WriteString(")\n\nfunc main() {}\n")
	for _, f := range []string{"go.mod", "go.sum"} {
		b, err := os.ReadFile(filepath.Join(module, f))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(filepath.Join(dir, "cmd", "warm"), 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "cmd", "warm", "main.go"), []byte(main.String()), 0o644)
}
