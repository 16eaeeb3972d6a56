package isolate

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	dc "github.com/ory/dockertest/v3/docker"

	"snacklab/containers"
	"snacklab/labsteps"
)

// Building a module submission runs its author's choices through the Go
// toolchain: which files are compiled, which directories `replace` points
// to, what the compiler prints about them. On the host, a package linked to
// a classmate's directory builds with the classmate's code, a .go file
// linked to a host file leaks that file into the compiler's errors, and a
// FIFO go.mod blocks the build. So the build runs in a container too: the
// host's Go toolchain and module cache bind-mounted read-only, a private
// copy of the submission's regular files read-only at /src, a build cache
// and the output directory writable, no network, an unprivileged user, a
// read-only root, memory, pids, CPU and wall-clock limits. The caller walks
// the tree first (grade.CheckSource) and refuses links and special files
// with a message for the learner; the copy here takes regular files only,
// opened without following links, whatever changed since.

// Paths in a build container.
const (
	buildGoRoot   = "/goroot"
	buildModCache = "/gomodcache"
	buildCache    = "/gocache"
	buildSrc      = "/src"
	buildOut      = "/out"
)

// MaxBuiltProgram bounds one executable a build makes: larger ones are
// refused and not copied to the output directory (issue #19: a 447-byte
// change, a 160 MiB array in each program, left 528 MiB there). The
// reference's executables are about 20 MiB, so this is some three times
// theirs.
const MaxBuiltProgram = 64 << 20

// Build defaults: a cold build of the reference (the SQLite driver) needs
// about 1.3 GiB and every CPU for half a minute; a warm one a few seconds.
const (
	DefaultBuildMemory = 3 << 30
	DefaultBuildPIDs   = 1024
	DefaultBuildTmp    = 1 << 30
)

// BuildOptions says what to build and how.
type BuildOptions struct {
	Src      string   // the module's directory (walked and checked by the caller)
	Out      string   // receives the executables, one per package's base name
	Name     string   // names the container; "" is Src's base name
	Packages []string // e.g. ./cmd/queuectl; required
	Timeout  time.Duration
	// GoRoot and ModCache are the host's Go toolchain and module cache,
	// mounted read-only; "" asks `go env`.
	GoRoot, ModCache string
	// GoCache is the build cache, shared by the builds of a cohort and
	// writable by the container's user; "" is DefaultGoCache().
	GoCache string
	// Limits: zero fields are DefaultBuildMemory, DefaultBuildPIDs, every
	// CPU, and Timeout as the wall-clock limit.
	Limits  Limits
	TempDir string
}

// BuildResult is what a build did. Failure is "" when every package built;
// else it says why, and Output holds what the compiler printed.
type BuildResult struct {
	Output  string
	Failure string
	Took    time.Duration
}

// DefaultGoCache is the build cache of isolated builds: under the user's
// cache dir, apart from the host's own (the container's user writes it).
func DefaultGoCache() (string, error) {
	d, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(d, "snacklab", "isolated-gocache"), nil
}

// hostGo asks the host's go command for GOROOT and GOMODCACHE.
func hostGo(ctx context.Context) (goroot, modcache string, err error) {
	out, err := exec.CommandContext(ctx, "go", "env", "GOROOT", "GOMODCACHE").Output()
	if err != nil {
		return "", "", fmt.Errorf("isolate: building needs the host's Go toolchain (go env GOROOT GOMODCACHE): %w", err)
	}
	f := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(f) != 2 {
		return "", "", fmt.Errorf("isolate: go env GOROOT GOMODCACHE printed %q", out)
	}
	return f[0], f[1], nil
}

// buildUser is the user a build runs as: ContainerUser when the grader is
// root (it then hands the writable directories to that user), else the
// grader's own unprivileged uid.
func buildUser() (user string, uid, gid int) {
	if os.Getuid() == 0 {
		return ContainerUser, 65532, 65532
	}
	return fmt.Sprintf("%d:%d", os.Getuid(), os.Getgid()), os.Getuid(), os.Getgid()
}

// Build builds opt.Packages of the module in opt.Src inside a container and
// copies the executables into opt.Out. A build that fails, is refused or
// runs out of time or memory is a BuildResult with Failure set; the error
// is the grader's own failure (the engine, the host's file system).
func (e *Engine) Build(ctx context.Context, opt BuildOptions) (BuildResult, error) {
	t0 := time.Now()
	var res BuildResult
	if len(opt.Packages) == 0 || opt.Src == "" || opt.Out == "" || opt.Timeout <= 0 {
		return res, errors.New("isolate: Build needs Src, Out, Packages and a Timeout")
	}
	if opt.Name == "" {
		opt.Name = filepath.Base(opt.Src)
	}
	if opt.GoRoot == "" || opt.ModCache == "" {
		gr, mc, err := hostGo(ctx)
		if err != nil {
			return res, err
		}
		opt.GoRoot, opt.ModCache = cmp(opt.GoRoot, gr), cmp(opt.ModCache, mc)
	}
	if opt.GoCache == "" {
		d, err := DefaultGoCache()
		if err != nil {
			return res, err
		}
		opt.GoCache = d
	}
	l := &opt.Limits
	l.Memory = cmp(l.Memory, DefaultBuildMemory)
	l.PIDs = cmp(l.PIDs, DefaultBuildPIDs)
	l.CPUs = cmp(l.CPUs, float64(runtime.NumCPU()))
	l.Wall = cmp(l.Wall, opt.Timeout)
	l.TmpSize = cmp(l.TmpSize, DefaultBuildTmp)
	user, uid, gid := buildUser()
	if err := os.MkdirAll(opt.GoCache, 0o755); err != nil {
		return res, err
	}
	if err := os.Lchown(opt.GoCache, uid, gid); err != nil && os.Getuid() == 0 {
		return res, err
	}

	root, err := os.MkdirTemp(opt.TempDir, "snacklab-isolate-build-*")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(root)
	src, out := filepath.Join(root, "src"), filepath.Join(root, "out")
	if why, err := copySource(opt.Src, src); err != nil || why != "" {
		res.Failure = why
		return res, err
	}
	if err := os.Mkdir(out, 0o755); err != nil {
		return res, err
	}
	if err := os.Lchown(out, uid, gid); err != nil && os.Getuid() == 0 {
		return res, err
	}
	if err := os.Chmod(root, 0o755); err != nil { // the container's user walks through it
		return res, err
	}

	args := append([]string{buildGoRoot + "/bin/go", "build", "-trimpath", "-o", buildOut + "/"}, opt.Packages...)
	id, err := e.createContainer(ctx, containerSpec{
		name: "build-" + opt.Name,
		cmd:  args,
		env: []string{"GOROOT=" + buildGoRoot, "GOMODCACHE=" + buildModCache, "GOCACHE=" + buildCache,
			"GOPATH=/tmp/gopath", "HOME=/tmp", "TMPDIR=/tmp", "PATH=" + buildGoRoot + "/bin",
			"CGO_ENABLED=0", "GOFLAGS=-mod=readonly -buildvcs=false", "GOPROXY=off", "GOSUMDB=off",
			"GOTOOLCHAIN=local", "GOWORK=off", "GOENV=off", "GOTELEMETRY=off"},
		workDir: buildSrc,
		mounts: []dc.HostMount{roBind(opt.GoRoot, buildGoRoot), roBind(opt.ModCache, buildModCache),
			roBind(src, buildSrc), rwBind(opt.GoCache, buildCache), rwBind(out, buildOut)},
		tmpfs:  map[string]int64{"/tmp": l.TmpSize},
		limits: *l,
		user:   user,
	})
	if id != "" {
		defer e.removeContainer(id)
	}
	if err != nil {
		return res, err
	}
	cr, err := e.runContainer(ctx, id, l.Wall)
	if err != nil {
		return res, err
	}
	res.Output = strings.TrimSpace(cr.stderr + cr.stdout)
	res.Took = time.Since(t0)
	switch {
	case cr.wall:
		res.Failure = fmt.Sprintf("go build did not finish within %v and was killed", opt.Timeout)
		return res, nil
	case cr.oom:
		res.Failure = fmt.Sprintf("go build ran out of memory (limit %d MiB) and was killed", l.Memory>>20)
		return res, nil
	case cr.code != 0:
		res.Failure = fmt.Sprintf("go build %s: exit status %d", strings.Join(opt.Packages, " "), cr.code)
		return res, nil
	}
	if err := os.MkdirAll(opt.Out, 0o755); err != nil {
		return res, err
	}
	for _, p := range opt.Packages {
		name := filepath.Base(p)
		why, err := copyOut(filepath.Join(out, name), filepath.Join(opt.Out, name))
		if err != nil {
			return res, err
		}
		if why != "" {
			res.Failure = why
			return res, nil
		}
	}
	return res, nil
}

func cmp[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// copySource copies the regular files and directories of src (but .git)
// into dst, readable by anyone: the container's user reads them. Anything
// else — a link, a FIFO, a device — is refused (why), as is a file that is
// not regular once opened without following links.
func copySource(src, dst string) (why string, err error) {
	err = filepath.WalkDir(src, func(p string, d fs.DirEntry, werr error) error {
		if werr != nil {
			return werr
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		switch t := d.Type(); {
		case d.IsDir() && d.Name() == ".git" && p != src:
			return filepath.SkipDir
		case d.IsDir():
			if err := os.Mkdir(target, 0o755); err != nil {
				return err
			}
			return os.Chmod(target, 0o755)
		case !t.IsRegular():
			why = fmt.Sprintf("%s is not a regular file (%v): submit regular files and directories only", rel, t.Type())
			return filepath.SkipAll
		}
		in, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
		if err != nil {
			why = fmt.Sprintf("%s: %v", rel, errors.Unwrap(err))
			return filepath.SkipAll
		}
		defer in.Close()
		if fi, err := in.Stat(); err != nil || !fi.Mode().IsRegular() {
			why = fmt.Sprintf("%s is not a regular file", rel)
			return filepath.SkipAll
		}
		o, err := os.OpenFile(target, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err != nil {
			return err
		}
		_, cerr := io.Copy(o, in)
		if err := o.Close(); cerr == nil {
			cerr = err
		}
		if cerr == nil {
			cerr = os.Chmod(target, 0o644)
		}
		return cerr
	})
	return why, err
}

// copyOut copies one built executable out of the container's output
// directory, without following links: only the go command wrote there, but
// nothing from a build is trusted as a path.
func copyOut(src, dst string) (why string, err error) {
	in, err := os.OpenFile(src, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return fmt.Sprintf("the build made no %s", filepath.Base(src)), nil
	}
	defer in.Close()
	fi, err := in.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		return fmt.Sprintf("the build's %s is not a regular file", filepath.Base(src)), nil
	}
	if fi.Size() > MaxBuiltProgram {
		return fmt.Sprintf("the build's %s is %d MiB, more than the %d MiB an executable may have (the reference's are about 20 MiB): it was not kept; look for a large array or embedded file",
			filepath.Base(src), (fi.Size()+1<<20-1)>>20, MaxBuiltProgram>>20), nil
	}
	os.Remove(dst)
	o, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o755)
	if err != nil {
		return "", err
	}
	_, cerr := io.Copy(o, io.LimitReader(in, MaxBuiltProgram))
	if err := o.Close(); cerr == nil {
		cerr = err
	}
	if cerr != nil {
		return "", cerr
	}
	if err := containers.CheckStatic(dst); err != nil {
		return strings.Replace(err.Error(), dst, filepath.Base(dst), 1), nil
	}
	return "", nil
}

// BuildFunc adapts Build to the shape of internal/grade's Boundary.Build.
func (e *Engine) BuildFunc(goCache string, limits Limits) func(ctx context.Context, src, bin string, timeout time.Duration) (output, failure string, err error) {
	return func(ctx context.Context, src, bin string, timeout time.Duration) (string, string, error) {
		name := filepath.Base(filepath.Dir(bin))
		r, err := e.Build(ctx, BuildOptions{Src: src, Out: bin, Name: name, Packages: buildPackages(), Timeout: timeout,
			GoCache: goCache, Limits: limits})
		return r.Output, r.Failure, err
	}
}

// buildPackages are the packages of a submission: ./cmd/NAME for each program.
func buildPackages() []string {
	var out []string
	for _, p := range labsteps.Programs {
		out = append(out, "./cmd/"+p)
	}
	return out
}

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
