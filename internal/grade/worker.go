package grade

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"snacklab/labsteps"
	"snacklab/labsteps/report"
	"snacklab/labsteps/result"
)

// WorkerArg, as the first argument after Config.Worker's prefix, makes a
// process run one lab step and write its result: the grader's isolation
// unit. `lab grade __step-worker …` is that process in the lab binary; a test
// binary calls WorkerMain from its TestMain.
const WorkerArg = "__step-worker"

// Why one process per step: the lab harness runs a step's programs as its
// own children, in its own process group. A broken submission can leave
// processes behind that the harness cannot see (a shell script's `sleep`
// keeps the stdout pipe open after the script itself is killed), can print
// until memory runs out, or can outlive the step. Running each step in a
// worker that leads a process group of its own lets the grader kill exactly
// that step's processes — all of them, however they were started — and lose
// nothing but that step when the worker itself dies.

const (
	// sweepGrace is how long after the step's time limit the worker kills
	// every process left in its group, so the harness can return and report.
	sweepGrace = time.Second
	// hardGrace is how long after the step's time limit the grader kills the
	// whole worker group and records the step as stopped by the grader.
	hardGrace = 15 * time.Second
	// orphanAfter: from this point in a step, processes in the worker's
	// group whose parent is gone are killed, every third tick.
	orphanAfter = 500 * time.Millisecond
	tick        = 100 * time.Millisecond
	// maxNarrative bounds the story a worker hands back (head and tail kept).
	maxNarrative = 256 << 10
)

// workerResult is what a worker writes for the grader.
type workerResult struct {
	Result result.Result `json:"result"`
	Notes  []string      `json:"notes,omitempty"` // what the worker had to do: orphans killed, leftovers swept
}

// WorkerMain runs one step as told by args (-bin, -step, -timeout, -work,
// -result, -mem) and writes the result as JSON. It returns the exit code.
func WorkerMain(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("lab grade "+WorkerArg, flag.ContinueOnError)
	fs.SetOutput(stderr)
	bin := fs.String("bin", "", "executables under test")
	step := fs.Int("step", 0, "step number")
	timeout := fs.Duration("timeout", time.Minute, "time limit of the step")
	work := fs.String("work", "", "parent of the step's work dir")
	out := fs.String("result", "", "write the result here")
	mem := fs.Int64("mem", 512<<20, "kill the step when this worker's resident memory exceeds this many bytes")
	cgroup := fs.String("cgroup", "", "comma-separated cgroup.procs files to join before the step starts")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	w := &stepWorker{timeout: *timeout, work: *work, out: *out, mem: *mem, stderr: stderr}
	if w.timeout == 0 {
		w.timeout = result.MaxStep // the step derives its own; sweep only past the longest it can
	}
	w.joinCgroup(*cgroup)
	steps, err := labsteps.Select([]string{strconv.Itoa(*step)})
	if err != nil || len(steps) != 1 || *out == "" || *bin == "" {
		fmt.Fprintf(stderr, "%s: want -bin, -result and one -step (%v)\n", WorkerArg, err)
		return 2
	}
	w.step = steps[0]
	cfg := labsteps.Config{Bin: *bin, WorkRoot: *work, StepTimeout: *timeout, Parallel: 1}
	done := make(chan result.Result, 1)
	go func() { done <- labsteps.RunStep(context.Background(), cfg, w.step) }()
	return w.watch(done)
}

// stepWorker is a worker process minding its one step: what it was told,
// and the notes on what it had to do to the step's processes.
type stepWorker struct {
	step    labsteps.Step
	timeout time.Duration
	work    string // parent of the step's work dir
	out     string // the result file
	mem     int64  // resident bytes past which the step is stopped; 0: no limit
	procs   string // the cgroup.procs file of the step's cgroup; "": none
	notes   []string
	stderr  io.Writer
}

// joinCgroup joins the cgroups whose cgroup.procs files list names
// (comma-separated; "" is none). A step that cannot join them still runs,
// with a note saying so.
func (w *stepWorker) joinCgroup(list string) {
	if list == "" {
		return
	}
	files := strings.Split(list, ",")
	if err := joinCgroups(files); err != nil {
		w.notes = append(w.notes, "the step runs without its cgroup: "+err.Error())
	} else {
		w.procs = files[0]
	}
}

// sweep kills what the step left: the whole cgroup when there is one,
// else the process group and the processes carrying the step's tag.
func (w *stepWorker) sweep() []string {
	if w.procs != "" {
		return append(killGroup(false), killListed(w.procs, os.Getpid())...)
	}
	return append(killGroup(false), killTagged(os.Getenv(tagEnv))...)
}

// watch waits for the step's result on done and writes it, returning the
// exit code. Meanwhile, every tick, it kills orphans that keep the step's
// pipes open, sweeps the group once the step is past its time limit, and
// stops the step when the worker's memory is past its limit.
func (w *stepWorker) watch(done <-chan result.Result) int {
	t0 := time.Now()
	ticker := time.NewTicker(tick)
	defer ticker.Stop()
	swept, ticks := false, 0
	for {
		select {
		case r := <-done:
			if pids := w.sweep(); len(pids) > 0 {
				w.notes = append(w.notes, "after the step ended, the grader killed processes it left running: "+strings.Join(pids, ", "))
			}
			return writeResult(w.out, workerResult{Result: trimResult(r), Notes: w.notes}, w.stderr)
		case <-ticker.C:
		}
		ticks++
		elapsed := time.Since(t0)
		if elapsed > orphanAfter && ticks%3 == 0 {
			if pids := killGroup(true); len(pids) > 0 {
				w.notes = append(w.notes, "the grader killed processes whose parent had already ended (they kept the step's pipes open): "+strings.Join(pids, ", "))
			}
		}
		if !swept && elapsed > w.timeout+sweepGrace {
			swept = true
			if pids := w.sweep(); len(pids) > 0 {
				w.notes = append(w.notes, fmt.Sprintf("%v after the step's time limit of %v, the grader killed every process it had left: %s",
					sweepGrace, w.timeout, strings.Join(pids, ", ")))
			}
		}
		if rss := residentBytes(); w.mem > 0 && rss > w.mem {
			return w.stopOverMemory(elapsed, rss)
		}
	}
}

// stopOverMemory writes the result of a step stopped because the harness
// holding its programs' output grew to rss bytes, then kills what the step
// left. It returns the exit code.
func (w *stepWorker) stopOverMemory(elapsed time.Duration, rss int64) int {
	s := w.step
	r := result.Result{Step: s.Step, Took: elapsed, Problem: fmt.Sprintf(
		"the grader stopped this step: the harness holding what the programs printed grew to %d MiB (limit %d MiB); a process printed without end",
		rss>>20, w.mem>>20)}
	if m, _ := filepath.Glob(filepath.Join(w.work, fmt.Sprintf("snacklab-step%d-*", s.Num))); len(m) == 1 {
		r.Dir = m[0]
	}
	code := writeResult(w.out, workerResult{Result: r, Notes: w.notes}, w.stderr)
	w.sweep()
	return code
}

func writeResult(path string, wr workerResult, stderr io.Writer) int {
	if err := report.WriteFile(path, func(w io.Writer) error { return json.NewEncoder(w).Encode(wr) }); err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", WorkerArg, err)
		return 1
	}
	return 0
}

// trimResult keeps a result small enough to hand back and report: the head
// and tail of a long story, and bounded check texts.
func trimResult(r result.Result) result.Result {
	r.Narrative = clip(r.Narrative, maxNarrative)
	for i := range r.Checks {
		r.Checks[i].Observed = clip(r.Checks[i].Observed, 4<<10)
		r.Checks[i].Expected = clip(r.Checks[i].Expected, 4<<10)
	}
	if len(r.Events) > 2000 {
		r.Events = append(r.Events[:1000:1000], r.Events[len(r.Events)-1000:]...)
	}
	for i := range r.Events {
		r.Events[i].Text = clip(r.Events[i].Text, 300)
	}
	return r
}

// clip keeps the head and tail of s within n bytes, valid UTF-8 kept valid.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const mark = "\n… (%d bytes left out) …\n"
	h := n * 2 / 3
	t := n - h
	head, tail := s[:h], s[len(s)-t:]
	head = strings.ToValidUTF8(head, "")
	tail = strings.ToValidUTF8(tail, "")
	return head + fmt.Sprintf(mark, len(s)-h-t) + tail
}

// ---- the grader's side ----

// stepPIDs bounds the processes and threads of one step in the unisolated
// mode (the pids cgroup): the reference needs fewer than 130.
const stepPIDs = 1024

// programEnv is the environment of a step's worker, and so of the programs
// it starts, in the unisolated mode: a minimal one, not the grader's (which
// may hold CI secrets, tokens, a DOCKER_HOST). No HOME: the contract needs
// none.
func programEnv() []string {
	env := []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/nonexistent", "TMPDIR=" + os.TempDir(), "LANG=C.UTF-8"}
	for _, k := range []string{"GOCOVERDIR", "GORACE"} { // the grader's own tests
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return env
}

// runIsolated runs step s against bin in a worker process that leads its
// own process group, with workRoot as the parent of the step's work dir.
// Whatever happens in the worker, it returns a result: a worker that dies or
// overruns becomes a failed step saying so, and every process of its group
// is killed before it returns.
func (g *grader) runIsolated(ctx context.Context, bin string, s labsteps.Step, workRoot, tag string) (result.Result, []string) {
	t0 := time.Now()
	resFile := filepath.Join(g.tmp, tag+".json")
	errFile, err := os.Create(filepath.Join(g.tmp, tag+".stderr"))
	if err != nil {
		return result.Result{Step: s.Step, Problem: "grader: " + err.Error(), NotJudged: result.Error}, nil
	}
	defer errFile.Close()
	hard := g.cfg.StepTimeout + hardGrace
	if g.cfg.StepTimeout == 0 {
		// The worker derives its limit from its calibration and the load
		// (at most result.MaxStep); this kill is the backstop past it.
		hard = result.MaxStep + hardGrace
	}
	hctx, cancel := context.WithTimeout(ctx, hard)
	defer cancel()
	args := append(append([]string(nil), g.cfg.Worker[1:]...), WorkerArg,
		"-bin", bin, "-step", strconv.Itoa(s.Num), "-timeout", g.cfg.StepTimeout.String(),
		"-work", workRoot, "-result", resFile, "-mem", strconv.FormatInt(g.cfg.MemLimit, 10))
	stepTag := filepath.Base(g.tmp) + "." + tag
	cg, err := g.cg.step(stepTag, g.cfg.StepMemory, stepPIDs)
	if err != nil {
		return result.Result{Step: s.Step, Problem: "grader: making the step's cgroup: " + err.Error(), NotJudged: result.Error}, nil
	}
	defer cg.remove()
	if cg != nil {
		args = append(args, "-cgroup", strings.Join(cg.procsFiles(), ","))
	}
	cmd := exec.CommandContext(hctx, g.cfg.Worker[0], args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Env = append(programEnv(), tagEnv+"="+stepTag)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = nil, errFile, errFile
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 2 * time.Second
	runErr := cmd.Run()
	var wr workerResult
	b, readErr := os.ReadFile(resFile)
	if readErr != nil && cmd.Process != nil {
		// The worker died or was killed before it could clean up: kill
		// what is left of its group, and what escaped it.
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		cg.killAll(0)
		killTagged(stepTag)
	}
	if readErr == nil {
		readErr = json.Unmarshal(b, &wr)
	}
	os.Remove(resFile)
	if readErr == nil {
		wr.Result.Step = s.Step
		return wr.Result, wr.Notes
	}
	r := result.Result{Step: s.Step, Took: time.Since(t0)}
	switch {
	case ctx.Err() != nil:
		r.Problem, r.NotJudged = "grading was interrupted", result.Interrupted
	case cg.oomKills() > 0:
		r.Problem = fmt.Sprintf("the grader stopped this step: its processes together reached the step's memory limit of %d MiB and the kernel killed them; a process printed or allocated without end",
			g.cfg.StepMemory>>20)
	case errors.Is(hctx.Err(), context.DeadlineExceeded):
		r.Problem = fmt.Sprintf("the grader stopped this step: it was still running %v after its time limit of %v; every process it started was killed",
			hardGrace, hard-hardGrace)
		r.TimedOut, r.NotJudged = true, result.Timeout // a limit the grader set
	default:
		errFile.Seek(0, io.SeekStart)
		tail, _ := io.ReadAll(io.LimitReader(errFile, 64<<10))
		r.Problem = fmt.Sprintf("the grader's step worker ended without a result (%v): %s", runErr, clip(strings.TrimSpace(string(tail)), 2000))
		r.NotJudged = result.Error
	}
	// The harness never got to say where the work dir is: find it.
	if m, _ := filepath.Glob(filepath.Join(workRoot, fmt.Sprintf("snacklab-step%d-*", s.Num))); len(m) == 1 {
		r.Dir, r.LogDir = m[0], filepath.Join(m[0], "logs")
	}
	return r, nil
}
