// Package isolate grades one submission — a directory holding queuectl,
// sender and receiver — by running `lab run` inside a throw-away Docker
// container, so that code nobody has reviewed runs with no network, a
// read-only file system, no capabilities, a non-root user, and limits on
// memory, processes, CPU and wall-clock time.
//
// The container is created from an image built FROM scratch that holds only
// the static lab binary. The submission's programs are copied into a private
// staging directory and bind-mounted read-only at /sub; /work and /tmp are
// size-limited tmpfs mounts; nothing else is writable. The lab writes its
// Gradescope results to its own stderr, which no program it grades can reach
// (the lab makes itself non-dumpable, see cmd/lab/isolated_linux.go), and
// its progress lines to stdout; both are read from Docker after the
// container ends. A container that outlives Limits.Wall is killed from
// outside, and the steps it had not reported fail with the reason
// "wall-clock limit". The container and the staging directory are removed
// whatever happens. See docs/isolation.md.
//
// One Engine (one image) serves a whole cohort; Engine.Run is safe to call
// from several goroutines.
package isolate

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"snacklab/labsteps"
	"snacklab/labsteps/result"
)

// Limits bound what one submission's container may use.
type Limits struct {
	// Memory is the container's memory limit in bytes, swap excluded (no
	// swap is allowed): the lab, the submission's processes and the files
	// in /work and /tmp together. 0 is DefaultMemory.
	Memory int64
	// PIDs bounds the processes and threads alive at once (the pids
	// cgroup), the lab's included. 0 is DefaultPIDs.
	PIDs int64
	// CPUs is how many CPUs' worth of time the container gets (CFS quota).
	// 0 is DefaultCPUs.
	CPUs float64
	// Wall is the wall-clock limit of the whole container, enforced from
	// outside: past it the container is killed. 0 is the steps' own time
	// limits plus WallGrace (see Options.wall).
	Wall time.Duration
	// WorkSize and TmpSize are the sizes of the tmpfs mounts at /work (the
	// steps' work dirs: queue files, logs) and /tmp. 0 is DefaultWorkSize
	// and DefaultTmpSize. Both count against Memory.
	WorkSize, TmpSize int64
}

// Defaults. The reference implementation needs about 128 MiB and fewer
// than 130 processes and threads with all eight steps at once (measured on
// this kit's 2-core machine: 128 MiB and 128 PIDs pass, 100 PIDs do not);
// the defaults leave four times that.
const (
	DefaultMemory   = 512 << 20
	DefaultPIDs     = 512
	DefaultCPUs     = 1.0
	DefaultWorkSize = 256 << 20
	DefaultTmpSize  = 64 << 20
	// WallGrace is added to the steps' time limits to make the default
	// wall-clock limit: container start, the lab's own clean-up after a
	// step's time limit (up to a few seconds), reports.
	WallGrace = 30 * time.Second
	// DefaultStepTimeout is the lab's own default --timeout.
	DefaultStepTimeout = 60 * time.Second
)

// ContainerUser is the uid:gid builds run as in their containers: not
// root, and no user of the host.
const ContainerUser = "65532:65532"

// The identities of a grading container (docs/isolation.md): the lab, the
// judge, runs as root with only JudgeCaps; every program of the submission,
// the judged, runs as JudgedUID:JudgedGID (step n's as JudgedUID+n) with no
// capabilities, and can write only its scratch directories. No user of the
// host is either: the ids sit far above every range a system hands out
// (system accounts below 1000, users below 60000, nobody 65534, systemd's
// dynamic users up to 65519), so no process of the host, or of the
// container's engine, shares a uid with a judged program, which could then
// signal or trace it. (65533 was the base once: step 1's programs ran as
// 65534, nobody, and could signal the host's processes of that uid.)
const (
	JudgeUser = "0:0"
	JudgedUID = 300000
	JudgedGID = 300000
)

// JudgeCaps are the capabilities the lab keeps: to start the programs as
// the judged (SETUID, SETGID), hand them their scratch directory (CHOWN),
// end them (KILL: another uid's processes), read and lock the files they
// make there (DAC_OVERRIDE: their directory is theirs, mode 0700), and let
// strace, the judge's, name the files behind a judged process's
// descriptors (SYS_PTRACE: /proc/PID/fd of another uid; without it strace
// -y prints bare descriptor numbers and steps 2 and 7 see no lock call on
// the queue file).
var JudgeCaps = []string{"CHOWN", "DAC_OVERRIDE", "KILL", "SETGID", "SETUID", "SYS_PTRACE"}

// Options says what to grade and how.
type Options struct {
	// LabBin is the static lab executable (CGO_ENABLED=0) put in the image.
	// Only the package-level Run reads it; an Engine was given its own.
	LabBin string
	// SubmissionBin is the directory holding queuectl, sender and receiver:
	// static Linux executables, since the container has no libc and no
	// interpreter. Only those three files are used.
	SubmissionBin string
	// OutDir, when set, receives results.json (Gradescope) and junit.xml.
	OutDir string
	// Name names the submission in the container's name and labels and in
	// messages; "" is the base name of SubmissionBin.
	Name string
	// Steps are the step numbers to run; empty is all of them.
	Steps []int
	// StepTimeout is the lab's per-step time limit (--timeout); 0: each
	// step derives it from its calibration and the load, as lab run does.
	StepTimeout time.Duration
	// Parallel is how many steps the lab runs at once (--parallel); 0 is
	// all of them.
	Parallel int
	Limits   Limits
	// TempDir is the parent of the private staging directory; "" is the
	// system's temp dir.
	TempDir string
}

// StepOutcome is one step's verdict.
type StepOutcome struct {
	Num   int
	Slug  string
	Title string
	Pass  bool
	// Reported: the lab inside the container reported this step. A step it
	// did not report (the container hit the wall-clock limit, or the lab
	// died) fails with Reason saying so.
	Reported bool
	Took     time.Duration
	// Reason says in one line why the step failed; "" for a pass.
	Reason string
	// Output is the step's text as Gradescope shows it: verdict, what was
	// checked, why it matters, and on failure expected and observed.
	Output string
}

// Outcome is what grading one submission in isolation found.
type Outcome struct {
	Name   string
	Steps  []StepOutcome // the requested steps, in order
	Passed int
	// Limits as applied, defaults filled in.
	Limits      Limits
	StepTimeout time.Duration
	// ExitCode is the lab's exit code in the container (0 every step
	// passed, 1 some failed); -1 when it was killed at the wall-clock limit
	// or never started.
	ExitCode int
	// WallLimit: the container ran past Limits.Wall and was killed.
	WallLimit bool
	// OOMKilled: the kernel killed a process of the container at the
	// memory limit (a submission's process, or the lab itself).
	OOMKilled bool
	// Problem says why some steps were not reported by the lab, or why no
	// container ran (a program missing or not static); "" otherwise.
	Problem string
	// NotGraded: the lab wrote no results (killed at the wall-clock
	// limit, crashed, stalled); every step fails with Problem, and no
	// score is recovered from its progress lines.
	NotGraded bool
	// Took is the wall time from staging to removal of the container.
	Took time.Duration
	// Stdout is the lab's progress output; Stderr what it printed on
	// stderr besides the results (a crash, an error). Both bounded.
	Stdout, Stderr string
	// Results and JUnit are the files written into Options.OutDir.
	Results, JUnit string
	// Reported are what the lab reported, in full (every check, part and
	// event); a step it did not report is missing.
	Reported []result.Result

	requested []int
}

// Score is the number of passed steps.
func (o Outcome) Score() int { return o.Passed }

// withDefaults fills in the zero fields of o.
func (o Options) withDefaults() (Options, error) {
	if o.SubmissionBin == "" {
		return o, errors.New("isolate: no SubmissionBin")
	}
	abs, err := filepath.Abs(o.SubmissionBin)
	if err != nil {
		return o, err
	}
	o.SubmissionBin = abs
	if o.Name == "" {
		o.Name = filepath.Base(abs)
	}
	if o.StepTimeout < 0 {
		o.StepTimeout = 0
	}
	if o.Parallel < 0 {
		return o, fmt.Errorf("isolate: Parallel %d: want 0 (all) or more", o.Parallel)
	}
	all := labsteps.Steps()
	if len(o.Steps) == 0 {
		for _, s := range all {
			o.Steps = append(o.Steps, s.Num)
		}
	}
	seen := map[int]bool{}
	for _, n := range o.Steps {
		if n < 1 || n > len(all) || seen[n] {
			return o, fmt.Errorf("isolate: Steps %v: want distinct step numbers from 1 to %d", o.Steps, len(all))
		}
		seen[n] = true
	}
	o.Steps = slices.Clone(o.Steps)
	slices.Sort(o.Steps)
	l := &o.Limits
	if l.Memory == 0 {
		l.Memory = DefaultMemory
	}
	if l.PIDs == 0 {
		l.PIDs = DefaultPIDs
	}
	if l.CPUs == 0 {
		l.CPUs = DefaultCPUs
	}
	if l.WorkSize == 0 {
		l.WorkSize = DefaultWorkSize
	}
	if l.TmpSize == 0 {
		l.TmpSize = DefaultTmpSize
	}
	if l.Wall == 0 {
		l.Wall = o.defaultWall()
	}
	switch {
	case l.Memory < 32<<20:
		return o, fmt.Errorf("isolate: Limits.Memory %d: want at least 32 MiB", l.Memory)
	case l.PIDs < 16:
		return o, fmt.Errorf("isolate: Limits.PIDs %d: want at least 16", l.PIDs)
	case l.CPUs < 0.01 || math.IsNaN(l.CPUs) || math.IsInf(l.CPUs, 0):
		return o, fmt.Errorf("isolate: Limits.CPUs %v: want at least 0.01", l.CPUs)
	case l.Wall < 0 || l.WorkSize < 0 || l.TmpSize < 0:
		return o, errors.New("isolate: negative limit")
	}
	return o, nil
}

// defaultWall is the time the lab needs at most when every step runs to its
// time limit — ceil(steps/parallel) rounds of StepTimeout — plus WallGrace.
func (o Options) defaultWall() time.Duration {
	par := o.Parallel
	if par <= 0 || par > len(o.Steps) {
		par = len(o.Steps)
	}
	rounds := (len(o.Steps) + par - 1) / par
	step := o.StepTimeout
	if step == 0 {
		step = result.MaxStep // each step derives its limit, at most this
	}
	return time.Duration(rounds)*step + WallGrace
}

// labArgs is the lab's command line in the container. --last none: a
// grader neither reads a last run's results from the submission (it could
// ship any) nor writes them into it.
func (o Options) labArgs() []string {
	args := []string{"/lab", "run", "--bin", subDir, "--work", workDir, "--json", "/dev/stderr", "--last", "none",
		"--timeout", o.StepTimeout.String(), "--judged-uid", strconv.Itoa(JudgedUID), "--judged-gid", strconv.Itoa(JudgedGID)}
	if o.Parallel > 0 {
		args = append(args, "--parallel", strconv.Itoa(o.Parallel))
	}
	nums := make([]string, len(o.Steps))
	for i, n := range o.Steps {
		nums[i] = strconv.Itoa(n)
	}
	return append(args, strings.Join(nums, ","))
}

// Paths in the container.
const (
	subDir  = "/sub"
	workDir = "/work"
	tmpDir  = "/tmp"
)

// Run grades one submission with an Engine of its own: it builds the image
// from opt.LabBin, runs the container and removes both. To grade several
// submissions, make one Engine with New and call its Run for each.
func Run(ctx context.Context, opt Options) (Outcome, error) {
	e, err := New(ctx, opt.LabBin)
	if err != nil {
		return Outcome{}, err
	}
	out, err := e.Run(ctx, opt)
	return out, errors.Join(err, e.Close())
}

// LabRunner is the shape of a per-submission runner for internal/grade: it
// runs steps against the executables in bin, each with the time limit
// stepTimeout, at most parallel at once (0: all), and returns one result
// per step in the order given. An error is the grader's own failure (no
// Docker engine, interrupted); whatever the submission does is a result.
type LabRunner func(ctx context.Context, bin string, steps []labsteps.Step, stepTimeout time.Duration, parallel int) ([]result.Result, error)

// Runner returns a LabRunner that grades in this engine's containers with
// limits (zero fields are the defaults). The results carry no work dirs:
// the container's /work is gone when it returns.
func (e *Engine) Runner(limits Limits) LabRunner {
	return func(ctx context.Context, bin string, steps []labsteps.Step, stepTimeout time.Duration, parallel int) ([]result.Result, error) {
		nums := make([]int, len(steps))
		for i, s := range steps {
			nums[i] = s.Num
		}
		out, err := e.Run(ctx, Options{SubmissionBin: bin, Name: containerName(bin), Steps: nums, StepTimeout: stepTimeout, Parallel: parallel, Limits: limits})
		if err != nil {
			return nil, err
		}
		byNum := map[int]result.Result{}
		for _, r := range out.LabResults() {
			byNum[r.Step.Num] = r
		}
		res := make([]result.Result, len(steps))
		for i, s := range steps {
			r, ok := byNum[s.Num]
			if !ok {
				r = result.Result{Step: s.Step, Problem: "the isolated run did not report this step", NotJudged: result.Error}
			}
			res[i] = r
		}
		return res, nil
	}
}

// containerName names a submission's container after its bin dir: a
// module's build goes to OUT/NAME/bin, so NAME.
func containerName(bin string) string {
	name := filepath.Base(bin)
	if name == "bin" {
		name = filepath.Base(filepath.Dir(bin))
	}
	return name
}
