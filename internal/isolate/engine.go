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
	"strings"
	"sync"
	"sync/atomic"
	"time"

	dc "github.com/ory/dockertest/v3/docker"

	"snacklab/containers"
	"snacklab/labsteps/harness"
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
// copied from this host when it has strace, with account files that name
// each step's judged identity for strace -u (harness.Accounts).
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
		// strace -u runs a traced program as its step's identity by name:
		// the image names each one (harness.Accounts), and nothing else.
		passwd, group := harness.Accounts(JudgedUID, JudgedGID)
		files[0].body = append(files[0].body, "COPY strace/ /\n"...)
		files = append(files, file{"strace/etc/passwd", 0o444, passwd}, file{"strace/etc/group", 0o444, group})
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
