package isolate

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	dc "github.com/ory/dockertest/v3/docker"

	"snacklab/containers"
	"snacklab/labsteps/mutants"
	"snacklab/labsteps/systrace"
)

// Why the Docker API (go-dockerclient, as vendored by dockertest) and not
// the docker CLI: the engine's answers come back typed — the exit code and
// OOMKilled from container inspect, "no such container" as an error value —
// instead of text to parse from a CLI whose output and flags vary between
// versions; every call takes a context, so a stuck daemon cannot hang the
// grader; and nothing depends on a docker binary being installed next to
// the grader (only on DOCKER_HOST or the local socket).

// ErrNoEngine wraps the error of New when no Docker engine answers.
var ErrNoEngine = errors.New("no Docker engine reachable")

// ErrCarriesMutants: the lab binary embeds the mutants, whose search texts
// are the reference solution; a grading container must not hold them.
var ErrCarriesMutants = errors.New("embeds the mutants (the reference's lines): build the grading lab with `CGO_ENABLED=0 go build -tags nomutants ./cmd/lab`")

// carriesMutants: lab holds mutants.CarriesMark.
func carriesMutants(lab []byte) bool { return bytes.Contains(lab, []byte(mutants.CarriesMark())) }

// CarriesMutants reports whether the executable at path embeds the mutants.
func CarriesMutants(path string) (bool, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return false, err
	}
	return carriesMutants(b), nil
}

// Labels put on every container an Engine creates; after an interrupted
// grader: docker ps -aq --filter label=snacklab.isolate | xargs -r docker rm -f
const (
	LabelEngine     = "snacklab.isolate"
	LabelSubmission = "snacklab.isolate.submission"
	// ImageRepo is the repository of the engines' images (tag: the lab's
	// digest and the engine's id): docker images snacklab-isolate
	ImageRepo = "snacklab-isolate"
)

// isolatedEnv and isolatedMarker: see cmd/lab/isolated_linux.go.
const (
	isolatedEnv    = "SNACKLAB_ISOLATED"
	isolatedMarker = "snacklab-lab: isolated: non-dumpable"
)

// Bounds on what is read back from a container.
const (
	maxStdout = 16 << 20
	maxStderr = 64 << 20
	// logMaxSize bounds the container's json-file log on the host's disk
	// (two files of this size).
	logMaxSize = "64m"
	// maxFiles is RLIMIT_NOFILE in the container.
	maxFiles = 4096
	// apiTimeout bounds each clean-up call to the engine.
	apiTimeout = 30 * time.Second
)

// Engine runs isolated lab runs with one image.
type Engine struct {
	client *dc.Client
	image  string
	id     string
	seq    atomic.Int64
	closed atomic.Bool
	mu     sync.Mutex
	made   []string // ids of the containers made
	local  *local   // set: no Docker engine, every run a local process (NewLocal)
}

// New connects to the Docker engine (DOCKER_HOST, or the local socket),
// checks that labBin is a static lab that protects its output when
// isolated, and builds the image: FROM scratch, /lab and nothing else.
// Nothing is pulled. Close removes the image.
func New(ctx context.Context, labBin string) (*Engine, error) {
	if labBin == "" {
		return nil, errors.New("isolate: no lab binary")
	}
	if err := containers.CheckStatic(labBin); err != nil {
		return nil, fmt.Errorf("isolate: the lab binary: %w", err)
	}
	if err := checkIsolatedLab(ctx, labBin); err != nil {
		return nil, err
	}
	client, err := Connect(ctx)
	if err != nil {
		return nil, err
	}
	lab, err := os.ReadFile(labBin)
	if err != nil {
		return nil, err
	}
	if carriesMutants(lab) {
		return nil, fmt.Errorf("isolate: %s %w", labBin, ErrCarriesMutants)
	}
	sum := sha256.Sum256(lab)
	var rnd [4]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return nil, err
	}
	e := &Engine{client: client, id: hex.EncodeToString(rnd[:])}
	e.image = ImageRepo + ":" + hex.EncodeToString(sum[:6]) + "-" + e.id
	if err := e.build(ctx, lab); err != nil {
		e.removeImage()
		return nil, err
	}
	return e, nil
}

// Connect returns a client of the Docker engine once it has answered a
// ping; the error wraps ErrNoEngine otherwise.
func Connect(ctx context.Context) (*dc.Client, error) {
	client, err := dc.NewClientFromEnv()
	if err == nil {
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err = client.PingWithContext(pctx)
		cancel()
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoEngine, err)
	}
	return client, nil
}

// checkIsolatedLab runs labBin on the host as the container will, and checks
// that it says it made itself non-dumpable: an older lab would let a
// submission write into the stream the results travel on.
func checkIsolatedLab(ctx context.Context, labBin string) error {
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(cctx, labBin, "help")
	cmd.Env = append(os.Environ(), isolatedEnv+"=1")
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = io.Discard, &stderr
	err := cmd.Run()
	if first, _, _ := strings.Cut(stderr.String(), "\n"); first != isolatedMarker {
		return fmt.Errorf("isolate: %s does not protect its output when isolated (no %q on stderr with %s=1; %v): rebuild it from this module's cmd/lab",
			labBin, isolatedMarker, isolatedEnv, err)
	}
	return nil
}

// Image is the engine's image reference.
func (e *Engine) Image() string { return e.image }

// ID is the value of LabelEngine on the engine's containers.
func (e *Engine) ID() string { return e.id }

// build makes the image from an in-memory context: a Dockerfile with two
// instructions and the lab, owned by root and not writable, and strace with
// the files it loads (steps 2 and 7 trace system calls; systrace.Files),
// copied from this host when it has strace.
func (e *Engine) build(ctx context.Context, lab []byte) error {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	type file struct {
		name string
		mode int64
		body []byte
	}
	files := []file{
		{"Dockerfile", 0o644, []byte("FROM scratch\nCOPY lab /lab\n")},
		// Root's alone: the judged cannot read the lab (nor exec it).
		{"lab", 0o500, lab},
	}
	if paths, err := systrace.Files(); err == nil {
		files[0].body = append(files[0].body, "COPY strace/ /\n"...)
		for _, p := range paths {
			body, err := os.ReadFile(p)
			if err != nil {
				return fmt.Errorf("isolate: strace for the image: %w", err)
			}
			files = append(files, file{"strace" + p, 0o555, body})
		}
	}
	now := time.Now()
	for _, f := range files {
		if err := tw.WriteHeader(&tar.Header{Name: f.name, Mode: f.mode, Size: int64(len(f.body)), ModTime: now}); err != nil {
			return err
		}
		if _, err := tw.Write(f.body); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	var out bytes.Buffer
	err := e.client.BuildImage(dc.BuildImageOptions{
		Context: ctx, Name: e.image, InputStream: &buf, OutputStream: &out,
		RmTmpContainer: true, ForceRmTmpContainer: true,
	})
	if err != nil {
		return fmt.Errorf("isolate: docker build %s: %v\n%s", e.image, err, out.String())
	}
	return nil
}

// Close removes every container the engine left (there are none unless a
// Run was interrupted mid-way) and the image.
func (e *Engine) Close() error {
	if e.closed.Swap(true) || e.local != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), apiTimeout)
	defer cancel()
	var errs []error
	cs, err := e.client.ListContainers(dc.ListContainersOptions{All: true, Context: ctx,
		Filters: map[string][]string{"label": {LabelEngine + "=" + e.id}}})
	if err != nil {
		errs = append(errs, err)
	}
	for _, c := range cs {
		if err := e.removeContainer(c.ID); err != nil {
			errs = append(errs, err)
		}
	}
	errs = append(errs, e.removeImage())
	return errors.Join(errs...)
}

func (e *Engine) removeImage() error {
	err := e.client.RemoveImageExtended(e.image, dc.RemoveImageOptions{Force: true})
	if err != nil && !isNotFound(err) {
		return fmt.Errorf("isolate: removing image %s: %w", e.image, err)
	}
	return nil
}

func (e *Engine) removeContainer(id string) error {
	ctx, cancel := context.WithTimeout(context.Background(), apiTimeout)
	defer cancel()
	err := e.client.RemoveContainer(dc.RemoveContainerOptions{ID: id, Force: true, RemoveVolumes: true, Context: ctx})
	if err != nil && !isNotFound(err) {
		return fmt.Errorf("isolate: removing container %s: %w", id, err)
	}
	return nil
}

func isNotFound(err error) bool {
	var e *dc.Error
	var nsc *dc.NoSuchContainer
	return errors.Is(err, dc.ErrNoSuchImage) || errors.As(err, &nsc) ||
		(errors.As(err, &e) && e.Status == http.StatusNotFound)
}

// Run grades one submission in a container of its own and writes
// results.json and junit.xml into opt.OutDir. Whatever the submission does
// is an Outcome; the error is for the grader's own failures (the engine,
// the output directory, ctx ended). The container and the staging copy are
// removed before Run returns, also on error.
func (e *Engine) Run(ctx context.Context, opt Options) (out Outcome, err error) {
	t0 := time.Now()
	if e.closed.Load() {
		return out, errors.New("isolate: engine closed")
	}
	if opt, err = opt.withDefaults(); err != nil {
		return out, err
	}
	out = Outcome{Name: opt.Name, Limits: opt.Limits, StepTimeout: opt.StepTimeout, ExitCode: -1, requested: opt.Steps}
	defer func() {
		out.Took = time.Since(t0)
		if err == nil && opt.OutDir != "" {
			out.Results, out.JUnit, err = writeReports(opt.OutDir, out)
		}
	}()

	stage, problem, err := stageSubmission(opt.TempDir, opt.SubmissionBin)
	if err != nil {
		return out, err
	}
	defer os.RemoveAll(stage.root)
	if problem != "" {
		out.Problem = problem
		out.fill(nil, problem)
		return out, nil
	}

	res, err := e.runOnce(ctx, labSpec(opt, stage.sub), opt.Limits.Wall)
	if err != nil {
		return out, err
	}
	out.ExitCode, out.WallLimit, out.OOMKilled = res.code, res.wall, res.oom
	out.Stdout, out.Stderr = res.stdout, res.stderr
	out.interpret(opt, res)
	out.scrub(stage.root, opt.SubmissionBin)
	return out, nil
}

// runOnce creates a container from spec, runs it to its end or the wall
// limit, and removes it whatever happened (a create that failed after the
// daemon made the container included).
func (e *Engine) runOnce(ctx context.Context, spec containerSpec, wall time.Duration) (res containerResult, err error) {
	if e.local != nil {
		return e.local.run(ctx, spec, wall)
	}
	id, err := e.createContainer(ctx, spec)
	if id != "" {
		defer func() {
			if rerr := e.removeContainer(id); rerr != nil && err == nil {
				err = rerr
			}
		}()
	}
	if err != nil {
		return res, err
	}
	return e.runContainer(ctx, id, wall)
}

// labSpec is the container of a lab run against the staged programs in
// sub: the lab as the judge with JudgeCaps, /sub read-only, /work and /tmp
// tmpfs, opt's limits. lab crash's container (Crash) differs only in cmd.
func labSpec(opt Options, sub string) containerSpec {
	return containerSpec{
		name:   opt.Name,
		cmd:    opt.labArgs(),
		env:    []string{isolatedEnv + "=1", "TMPDIR=" + tmpDir, "HOME=" + tmpDir},
		mounts: []dc.HostMount{roBind(sub, subDir)},
		tmpfs:  map[string]int64{workDir: opt.Limits.WorkSize, tmpDir: opt.Limits.TmpSize},
		limits: opt.Limits,
		user:   JudgeUser,
		caps:   JudgeCaps,
	}
}

// containerSpec is what differs between the containers an Engine makes: a
// lab run or a build.
type containerSpec struct {
	name    string
	cmd     []string
	env     []string
	workDir string
	mounts  []dc.HostMount
	tmpfs   map[string]int64 // path → size; noexec
	limits  Limits
	user    string
	caps    []string // added back after dropping all
}

func roBind(src, dst string) dc.HostMount {
	return dc.HostMount{Type: "bind", Source: src, Target: dst, ReadOnly: true,
		BindOptions: &dc.BindOptions{Propagation: "rprivate"}}
}

func rwBind(src, dst string) dc.HostMount {
	return dc.HostMount{Type: "bind", Source: src, Target: dst,
		BindOptions: &dc.BindOptions{Propagation: "rprivate"}}
}

// createContainer creates (not starts) a container of the engine's image
// with no network, a read-only root, no capabilities, and the spec's
// limits. It returns the container's id whenever one exists, also with an
// error.
func (e *Engine) createContainer(ctx context.Context, sp containerSpec) (string, error) {
	name := fmt.Sprintf("snacklab-isolate-%s-%03d-%s", e.id, e.seq.Add(1), containerSafe(sp.name))
	if err := ctx.Err(); err != nil {
		return "", fmt.Errorf("isolate: creating container %s: %w", name, err)
	}
	// The create call itself is not cancelled with ctx: a request the
	// daemon has received goes on after the client gives up, and a
	// container it creates then has no id here to remove (one was left
	// "created" when a grader was interrupted mid-create). A fresh context
	// lets the call finish and return the id; the caller removes it and
	// reports ctx's end.
	cctx, ccancel := context.WithTimeout(context.WithoutCancel(ctx), apiTimeout)
	defer ccancel()
	l := sp.limits
	tmpfs := map[string]string{}
	for p, size := range sp.tmpfs {
		// /work is the judge's (root's): the judged reach their scratch
		// dirs through it but create nothing in it. /tmp is anyone's.
		mode := "1777"
		if p == workDir && sp.user == JudgeUser {
			mode = "0711"
		}
		tmpfs[p] = "rw,noexec,nosuid,nodev,mode=" + mode + ",size=" + strconv.FormatInt(size, 10)
	}
	const period = 100_000 // µs, the CFS default
	c, err := e.client.CreateContainer(dc.CreateContainerOptions{
		Context: cctx,
		Name:    name,
		Config: &dc.Config{
			Image:           e.image,
			Cmd:             sp.cmd,
			User:            sp.user,
			Env:             sp.env,
			WorkingDir:      sp.workDir,
			NetworkDisabled: true,
			Labels:          map[string]string{LabelEngine: e.id, LabelSubmission: sp.name},
		},
		HostConfig: &dc.HostConfig{
			// No network: a loopback interface only. Docker writes no
			// resolv.conf then, so a lookup asks 127.0.0.1:53 and [::1]:53,
			// the container's own loopback; DNS keeps a resolver, should
			// one be written, on that loopback too.
			NetworkMode:    "none",
			DNS:            []string{"127.0.0.1"},
			IpcMode:        "none",
			Mounts:         sp.mounts,
			Tmpfs:          tmpfs,
			ReadonlyRootfs: true,
			CapDrop:        []string{"ALL"},
			CapAdd:         sp.caps,
			SecurityOpt:    []string{"no-new-privileges:true"},
			Memory:         l.Memory,
			MemorySwap:     l.Memory, // the same: no swap
			PidsLimit:      l.PIDs,
			CPUPeriod:      period,
			CPUQuota:       int64(l.CPUs * period),
			// No core dumps; open files bounded per process (kernel memory
			// that cgroup v1 may not charge to the container).
			Ulimits: []dc.ULimit{{Name: "core", Soft: 0, Hard: 0}, {Name: "nofile", Soft: maxFiles, Hard: maxFiles}},
			LogConfig: dc.LogConfig{Type: "json-file",
				Config: map[string]string{"max-size": logMaxSize, "max-file": "2"}},
			AutoRemove: false, // the exit code and logs are read first
		},
	})
	if err != nil {
		// The container may exist although create reported an error: it
		// is removed by name (the API takes a name where it takes an id).
		return e.remember(name), fmt.Errorf("isolate: creating container %s: %w", name, err)
	}
	e.remember(c.ID)
	if err := ctx.Err(); err != nil {
		return c.ID, fmt.Errorf("isolate: creating container %s: %w", name, err)
	}
	return c.ID, nil
}

// remember records a container the engine made, so that its tests judge
// only their own containers' processes.
func (e *Engine) remember(id string) string {
	e.mu.Lock()
	e.made = append(e.made, id)
	e.mu.Unlock()
	return id
}

// containerResult is what a container did.
type containerResult struct {
	code           int
	wall, oom      bool
	took           time.Duration
	stdout, stderr string
	stdoutCut      bool
	stderrCut      bool
}

// runContainer starts the container, waits for its end or the wall-clock
// limit (then kills it), and reads its exit and output.
func (e *Engine) runContainer(ctx context.Context, id string, wall time.Duration) (containerResult, error) {
	var res containerResult
	// Not cancelled with ctx, as create: a start the daemon goes on with
	// after the client gave up would race the removal.
	sctx, scancel := context.WithTimeout(context.WithoutCancel(ctx), apiTimeout)
	err := e.client.StartContainerWithContext(id, nil, sctx)
	scancel()
	if err != nil {
		return res, fmt.Errorf("isolate: starting container: %w", err)
	}
	if ctx.Err() != nil {
		return res, fmt.Errorf("isolate: interrupted: %w", ctx.Err())
	}
	t0 := time.Now()
	wctx, cancel := context.WithTimeout(ctx, wall)
	_, werr := e.client.WaitContainerWithContext(id, wctx)
	cancel()
	if werr != nil {
		if ctx.Err() != nil {
			return res, fmt.Errorf("isolate: interrupted: %w", ctx.Err())
		}
		if !errors.Is(wctx.Err(), context.DeadlineExceeded) {
			return res, fmt.Errorf("isolate: waiting for the container: %w", werr)
		}
		// Past the wall-clock limit: kill it from outside.
		res.wall = true
		kctx, kcancel := context.WithTimeout(context.Background(), apiTimeout)
		kerr := e.client.KillContainer(dc.KillContainerOptions{ID: id, Signal: dc.SIGKILL, Context: kctx})
		var notRunning *dc.ContainerNotRunning
		if kerr != nil && !errors.As(kerr, &notRunning) {
			kcancel()
			return res, fmt.Errorf("isolate: killing the container at the wall-clock limit: %w", kerr)
		}
		_, werr = e.client.WaitContainerWithContext(id, kctx)
		kcancel()
		if werr != nil {
			return res, fmt.Errorf("isolate: waiting for the killed container: %w", werr)
		}
	}
	res.took = time.Since(t0)
	ictx, icancel := context.WithTimeout(context.Background(), apiTimeout)
	defer icancel()
	c, err := e.client.InspectContainerWithContext(id, ictx)
	if err != nil {
		return res, fmt.Errorf("isolate: inspecting the container: %w", err)
	}
	if c.State.Running {
		return res, errors.New("isolate: the container still runs after its wait returned")
	}
	res.code, res.oom = c.State.ExitCode, c.State.OOMKilled
	if res.wall {
		res.code = -1
	}
	stdout, stderr := &capped{max: maxStdout}, &capped{max: maxStderr}
	err = e.client.Logs(dc.LogsOptions{Context: ictx, Container: id, OutputStream: stdout, ErrorStream: stderr,
		Stdout: true, Stderr: true})
	if err != nil {
		return res, fmt.Errorf("isolate: reading the container's output: %w", err)
	}
	res.stdout, res.stderr = stdout.b.String(), stderr.b.String()
	res.stdoutCut, res.stderrCut = stdout.cut, stderr.cut
	return res, nil
}

// capped keeps the first max bytes written to it.
type capped struct {
	b   bytes.Buffer
	max int
	cut bool
}

func (c *capped) Write(p []byte) (int, error) {
	room := c.max - c.b.Len()
	if len(p) > room {
		c.cut = true
		c.b.Write(p[:max(room, 0)])
	} else {
		c.b.Write(p)
	}
	return len(p), nil
}

// containerSafe makes s usable in a container name.
func containerSafe(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '_', r == '-':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
		if b.Len() >= 40 {
			break
		}
	}
	if b.Len() == 0 {
		return "sub"
	}
	return b.String()
}
