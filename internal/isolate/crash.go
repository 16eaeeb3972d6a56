package isolate

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"snacklab/internal/crash"
	"snacklab/internal/scrub"
)

// Crash verification (`lab crash`, docs/crash.md) in a grading container:
// the same image, mounts, limits, user and capabilities as a step run, so
// the separation is lab run's — the lab traces and kills as root with
// JudgeCaps (SYS_PTRACE is among them), every program of the submission
// runs as JudgedUID:JudgedGID (lab crash --judged-uid), and the report
// travels on the lab's stderr, which the judged cannot reach.

// DefaultCrashWall is the wall-clock limit of a crash or power-cut run when
// Limits.Wall is 0: every crash point of the five programs and the soak, or
// every state of the small budget, with room for a loaded machine (lab
// grade took 4m19s for two submissions' crash points side by side, each
// container at one CPU, on this kit's shared 2-core machine). Not the
// steps' wall: a step takes seconds, the enumeration minutes.
const DefaultCrashWall = 15 * time.Minute

// CrashOptions says what a crash run in a container checks.
type CrashOptions struct {
	// SubmissionBin, Name, Limits and TempDir are as in Options; Limits.Wall
	// 0 is DefaultCrashWall.
	SubmissionBin string
	Name          string
	Limits        Limits
	TempDir       string
	// Seed and Kills are lab crash's --seed and --kills (Kills 0: no soak).
	Seed  int64
	Kills int
	// Programs limits the enumeration (lab crash --program); none: all.
	Programs []string
	// PowerCut runs lab crash --power-cut (the small budget, seeded with
	// Seed) instead of crash points and the soak; Kills is unused.
	PowerCut bool
}

// CrashOutcome is what a crash run in a container found.
type CrashOutcome struct {
	// Report is the lab's report, or PowerCut with CrashOptions.PowerCut;
	// nil when not graded.
	Report   *crash.Report
	PowerCut *crash.PowerCutReport
	// NotGraded says why no report counts (a problem staging the programs,
	// the wall-clock limit, a lab that died or printed no report it could
	// stand by); "" when Report is set.
	NotGraded string
	ExitCode  int
	WallLimit bool
	OOMKilled bool
	Limits    Limits
	Took      time.Duration
	// Stderr is what the lab printed on stderr besides the report.
	Stdout, Stderr string
}

// crashArgs is lab crash's command line in the container.
func (o CrashOptions) crashArgs() []string {
	args := []string{"/lab", "crash", "--bin", subDir, "--work", workDir, "--json", "/dev/stderr",
		"--seed", strconv.FormatInt(o.Seed, 10),
		"--judged-uid", strconv.Itoa(JudgedUID), "--judged-gid", strconv.Itoa(JudgedGID)}
	if o.PowerCut {
		args = append(args, "--power-cut")
	} else {
		args = append(args, "--kills", strconv.Itoa(o.Kills))
	}
	if len(o.Programs) > 0 {
		args = append(args, "--program", strings.Join(o.Programs, ","))
	}
	return args
}

// options is o as the step runs' Options, for their defaults and checks.
func (o CrashOptions) options() (Options, error) {
	if o.Seed == 0 {
		// lab crash draws a seed from the clock for 0: a grade must replay.
		return Options{}, errors.New("isolate: crash: seed 0 (want the submission's own)")
	}
	opt := Options{SubmissionBin: o.SubmissionBin, Name: o.Name, Limits: o.Limits, TempDir: o.TempDir}
	if opt.Limits.Wall == 0 {
		opt.Limits.Wall = DefaultCrashWall
	}
	return opt.withDefaults()
}

// Crash runs `lab crash` against one submission in a container of its own
// and returns its report. Whatever the submission does is a CrashOutcome
// (a container killed at the wall-clock limit, a report that cannot be
// read: NotGraded, never a score); the error is the grader's own failure.
// The container and the staging copy are removed before Crash returns.
func (e *Engine) Crash(ctx context.Context, co CrashOptions) (out CrashOutcome, err error) {
	t0 := time.Now()
	defer func() { out.Took = time.Since(t0) }()
	if e.closed.Load() {
		return out, errors.New("isolate: engine closed")
	}
	opt, err := co.options()
	if err != nil {
		return out, err
	}
	out = CrashOutcome{ExitCode: -1, Limits: opt.Limits}
	stage, problem, err := stageSubmission(opt.TempDir, opt.SubmissionBin)
	if err != nil {
		return out, err
	}
	defer os.RemoveAll(stage.root)
	if problem != "" {
		out.NotGraded = problem
		return out, nil
	}
	spec := labSpec(opt, stage.sub)
	spec.cmd = co.crashArgs()
	res, err := e.runOnce(ctx, spec, opt.Limits.Wall)
	if err != nil {
		return out, err
	}
	out.ExitCode, out.WallLimit, out.OOMKilled, out.Stdout = res.code, res.wall, res.oom, res.stdout
	out.interpret(co, res)
	scrubCrash(&out, stage.root, opt.SubmissionBin)
	return out, nil
}

// interpret reads the report from the lab's stderr, after its isolated
// marker, and keeps it only if the lab stood by it: it ended on its own,
// with 0 for a report without violations and 1 for one with, for this
// seed and these programs.
func (o *CrashOutcome) interpret(co CrashOptions, res containerResult) {
	ending := (&Outcome{Limits: o.Limits}).ending(res)
	rest, marker := strings.CutPrefix(res.stderr, isolatedMarker+"\n")
	o.Stderr = rest
	switch {
	case res.wall:
		o.NotGraded = fmt.Sprintf("%s: lab crash was still running after %v and was killed from outside; not graded", WallReason, o.Limits.Wall)
		return
	case !marker:
		o.NotGraded = "the lab in the container did not start as an isolated grader" + ending + "; not graded"
		return
	case res.stderrCut:
		o.NotGraded = "lab crash's report was cut at the output bound; not graded"
		return
	}
	var rep any = &crash.Report{}
	if co.PowerCut {
		rep = &crash.PowerCutReport{}
	}
	tail, err := parseCrashReport(rest, rep)
	if err != nil {
		o.NotGraded = fmt.Sprintf("lab crash printed no report it could stand by (%v)%s; not graded", err, ending)
		return
	}
	o.Stderr = tail
	if err := checkCrashReport(rep, co, res.code); err != nil {
		o.NotGraded = fmt.Sprintf("lab crash's report does not match its run (%v)%s; not graded", err, ending)
		return
	}
	switch r := rep.(type) {
	case *crash.Report:
		o.Report = r
	case *crash.PowerCutReport:
		o.PowerCut = r
	}
}

// parseCrashReport decodes into rep the JSON report lab crash --json
// writes: the first line that opens an object starts it. It returns the
// rest of stderr.
func parseCrashReport(stderr string, rep any) (string, error) {
	start := -1
	switch {
	case strings.HasPrefix(stderr, "{\n"):
		start = 0
	case strings.Contains(stderr, "\n{\n"):
		start = strings.Index(stderr, "\n{\n") + 1
	default:
		return "", errors.New("no JSON report on stderr")
	}
	dec := json.NewDecoder(strings.NewReader(stderr[start:]))
	dec.DisallowUnknownFields()
	if err := dec.Decode(rep); err != nil {
		return "", fmt.Errorf("the report: %w", err)
	}
	var rest bytes.Buffer
	rest.ReadFrom(dec.Buffered())
	return stderr[:start] + strings.TrimLeft(rest.String(), "\n"), nil
}

// checkCrashReport: the report is this run's, and the exit code agrees
// with its verdict.
func checkCrashReport(rep any, co CrashOptions, code int) error {
	ok, bin, seed, programs, kills := summary(rep)
	switch {
	case bin != subDir:
		return fmt.Errorf("bin %q, want %s", bin, subDir)
	case seed != co.Seed:
		return fmt.Errorf("seed %d, want %d", seed, co.Seed)
	case !co.PowerCut && co.Kills > 0 && kills != co.Kills:
		return fmt.Errorf("no soak of %d kills", co.Kills)
	case ok && code != 0, !ok && code != 1:
		return fmt.Errorf("ok %v with exit %d", ok, code)
	}
	want := co.Programs
	if len(want) == 0 {
		want = crash.Programs
	}
	if !slices.Equal(programs, want) {
		return fmt.Errorf("programs %v enumerated, want %v", programs, want)
	}
	return nil
}

// summary is what checkCrashReport reads of either report (*crash.Report
// or *crash.PowerCutReport): its verdict, bin, seed, the programs it
// covered and the soak's kills.
func summary(rep any) (ok bool, bin string, seed int64, programs []string, kills int) {
	switch r := rep.(type) {
	case *crash.Report:
		for _, p := range r.Programs {
			programs = append(programs, p.Program)
		}
		if r.Soak != nil {
			kills = r.Soak.Kills
		}
		return r.OK, r.Bin, r.Seed, programs, kills
	case *crash.PowerCutReport:
		for _, p := range r.Programs {
			programs = append(programs, p.Program)
		}
		return r.OK, r.Bin, r.Seed, programs, 0
	}
	return false, "", 0, nil, 0
}

// scrubCrash takes the grader's and the engine's paths out of every
// string of o (the report included), as Outcome.scrub does.
func scrubCrash(o *CrashOutcome, hostPaths ...string) {
	if err := scrub.New(hostPaths...).JSON(o); err != nil {
		*o = CrashOutcome{Limits: o.Limits, NotGraded: "the grader could not clean its report: " + err.Error()}
	}
}

// CrashRunner returns the shape internal/grade's Boundary.Crash takes: lab
// crash against the executables in bin, every program and a soak of kills
// with seed, in this engine's containers with limits (Wall 0:
// DefaultCrashWall, not the steps' wall: a crash run is minutes).
func (e *Engine) CrashRunner(limits Limits) func(ctx context.Context, bin string, seed int64, kills int) (*crash.Report, string, error) {
	return func(ctx context.Context, bin string, seed int64, kills int) (*crash.Report, string, error) {
		out, err := e.Crash(ctx, CrashOptions{SubmissionBin: bin, Name: containerName(bin), Limits: limits, Seed: seed, Kills: kills})
		if err != nil {
			return nil, "", err
		}
		return out.Report, out.NotGraded, nil
	}
}

// PowerCutRunner is CrashRunner for lab crash --power-cut (the small
// budget, seeded with seed): the shape of Boundary.PowerCut.
func (e *Engine) PowerCutRunner(limits Limits) func(ctx context.Context, bin string, seed int64) (*crash.PowerCutReport, string, error) {
	return func(ctx context.Context, bin string, seed int64) (*crash.PowerCutReport, string, error) {
		out, err := e.Crash(ctx, CrashOptions{SubmissionBin: bin, Name: containerName(bin), Limits: limits, Seed: seed, PowerCut: true})
		if err != nil {
			return nil, "", err
		}
		return out.PowerCut, out.NotGraded, nil
	}
}
