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
	"snacklab/internal/grade"
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
	// TimedOut: the build ran past its wall-clock limit (the grader's,
	// not the submission's fault: not graded, see grade.ErrBuildLimit).
	TimedOut bool
	Took     time.Duration
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
	opt, err := opt.withDefaults(ctx)
	if err != nil {
		return res, err
	}
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
	if why, err := stageBuild(opt.Src, root, src, out, uid, gid); err != nil || why != "" {
		res.Failure = why
		return res, err
	}

	id, err := e.createContainer(ctx, buildSpec(opt, src, out, user))
	if id != "" {
		defer e.removeContainer(id)
	}
	if err != nil {
		return res, err
	}
	cr, err := e.runContainer(ctx, id, opt.Limits.Wall)
	if err != nil {
		return res, err
	}
	res.Output = strings.TrimSpace(cr.stderr + cr.stdout)
	res.Took = time.Since(t0)
	res.TimedOut = cr.wall
	if res.Failure = buildFailure(cr, opt); res.Failure != "" {
		return res, nil
	}
	res.Failure, err = copyBuilt(opt.Packages, out, opt.Out)
	return res, err
}

// withDefaults checks opt and fills in its zero fields: the container's
// name, the host's toolchain and module cache, the shared build cache and
// the limits.
func (opt BuildOptions) withDefaults(ctx context.Context) (BuildOptions, error) {
	if len(opt.Packages) == 0 || opt.Src == "" || opt.Out == "" || opt.Timeout <= 0 {
		return opt, errors.New("isolate: Build needs Src, Out, Packages and a Timeout")
	}
	if opt.Name == "" {
		opt.Name = filepath.Base(opt.Src)
	}
	if opt.GoRoot == "" || opt.ModCache == "" {
		gr, mc, err := hostGo(ctx)
		if err != nil {
			return opt, err
		}
		opt.GoRoot, opt.ModCache = cmp(opt.GoRoot, gr), cmp(opt.ModCache, mc)
	}
	if opt.GoCache == "" {
		d, err := DefaultGoCache()
		if err != nil {
			return opt, err
		}
		opt.GoCache = d
	}
	l := &opt.Limits
	l.Memory = cmp(l.Memory, DefaultBuildMemory)
	l.PIDs = cmp(l.PIDs, DefaultBuildPIDs)
	l.CPUs = cmp(l.CPUs, float64(runtime.NumCPU()))
	l.Wall = cmp(l.Wall, opt.Timeout)
	l.TmpSize = cmp(l.TmpSize, DefaultBuildTmp)
	return opt, nil
}

// stageBuild lays out a build's directories under root: src, the copy of
// the module in module (a submission's problem with it is why), and out,
// writable by the build's user (uid, gid).
func stageBuild(module, root, src, out string, uid, gid int) (why string, err error) {
	if why, err := copySource(module, src); err != nil || why != "" {
		return why, err
	}
	if err := os.Mkdir(out, 0o755); err != nil {
		return "", err
	}
	if err := os.Lchown(out, uid, gid); err != nil && os.Getuid() == 0 {
		return "", err
	}
	if err := os.Chmod(root, 0o755); err != nil { // the container's user walks through it
		return "", err
	}
	return "", nil
}

// buildSpec is the container of a build: go build of opt.Packages from
// src (read-only) into out, the host's toolchain and module cache
// read-only, the shared build cache writable, offline, as user.
func buildSpec(opt BuildOptions, src, out, user string) containerSpec {
	args := append([]string{buildGoRoot + "/bin/go", "build", "-trimpath", "-o", buildOut + "/"}, opt.Packages...)
	return containerSpec{
		name: "build-" + opt.Name,
		cmd:  args,
		env: []string{"GOROOT=" + buildGoRoot, "GOMODCACHE=" + buildModCache, "GOCACHE=" + buildCache,
			"GOPATH=/tmp/gopath", "HOME=/tmp", "TMPDIR=/tmp", "PATH=" + buildGoRoot + "/bin",
			"CGO_ENABLED=0", "GOFLAGS=-mod=readonly -buildvcs=false", "GOPROXY=off", "GOSUMDB=off",
			"GOTOOLCHAIN=local", "GOWORK=off", "GOENV=off", "GOTELEMETRY=off"},
		workDir: buildSrc,
		mounts: []dc.HostMount{roBind(opt.GoRoot, buildGoRoot), roBind(opt.ModCache, buildModCache),
			roBind(src, buildSrc), rwBind(opt.GoCache, buildCache), rwBind(out, buildOut)},
		tmpfs:  map[string]int64{"/tmp": opt.Limits.TmpSize},
		limits: opt.Limits,
		user:   user,
	}
}

// buildFailure says why the build container cr failed ("" when it built).
func buildFailure(cr containerResult, opt BuildOptions) string {
	switch {
	case cr.wall:
		return fmt.Sprintf("go build did not finish within %v and was killed", opt.Timeout)
	case cr.oom:
		return fmt.Sprintf("go build ran out of memory (limit %d MiB) and was killed", opt.Limits.Memory>>20)
	case cr.code != 0:
		return fmt.Sprintf("go build %s: exit status %d", strings.Join(opt.Packages, " "), cr.code)
	}
	return ""
}

// copyBuilt copies the executable of each package from the build's out
// directory into dst; why is the first that could not be kept.
func copyBuilt(packages []string, out, dst string) (why string, err error) {
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return "", err
	}
	for _, p := range packages {
		name := filepath.Base(p)
		why, err := copyOut(filepath.Join(out, name), filepath.Join(dst, name))
		if err != nil {
			return "", err
		}
		if why != "" {
			return why, nil
		}
	}
	return "", nil
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
		if err == nil && r.TimedOut {
			return r.Output, "", fmt.Errorf("%s: %w", r.Failure, grade.ErrBuildLimit)
		}
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
