package isolate_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	dc "github.com/ory/dockertest/v3/docker"

	"snacklab/internal/isolate"
	"snacklab/internal/tier"
	"snacklab/labsteps"
	"snacklab/labsteps/result"
)

// requireDocker turns "no Docker engine" from a skip into a failure, so that
// CI proves these tests ran (the same switch as containers/).
const requireDocker = "SNACKLAB_REQUIRE_DOCKER"

// needDocker connects to the engine, or skips — or fails when
// SNACKLAB_REQUIRE_DOCKER=1 says the tests must run.
func needDocker(t testing.TB) *dc.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	c, err := isolate.Connect(ctx)
	if err != nil {
		msg := fmt.Sprintf("%v, so the isolation tests did not run", err)
		if os.Getenv(requireDocker) == "1" {
			t.Fatalf("%s; %s=1 requires them", msg, requireDocker)
		}
		t.Skipf("%s; set %s=1 to make this a failure", msg, requireDocker)
	}
	return c
}

// ---- binaries, built once per test binary ----

type binaries struct {
	lab       string            // static lab
	reference string            // dir: the reference queuectl, sender, receiver
	hostile   map[string]string // mode → dir holding the hostile program under the three names
	err       error
}

var (
	buildOnce sync.Once
	built     binaries
	buildDir  string
	// netTarget is the host listener the "net" hostile dials; opened before
	// the build since its address is compiled in.
	netListener net.Listener
	netAccepted atomic.Int64
	netConn     = make(chan struct{}, 16) // a value per accepted connection
)

func TestMain(m *testing.M) {
	code := m.Run()
	if netListener != nil {
		netListener.Close()
	}
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

func moduleRoot() (string, error) { return filepath.Abs(filepath.Join("..", "..")) }

func goBuild(out, ldflags string, pkgs ...string) error {
	root, err := moduleRoot()
	if err != nil {
		return err
	}
	args := append([]string{"build", "-trimpath", "-buildvcs=false", "-ldflags=-s -w " + ldflags, "-o", out}, pkgs...)
	cmd := exec.Command("go", args...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, b)
	}
	return nil
}

var hostileModes = []string{"net", "write", "fork", "mem", "sleep", "forge", "escape"}

// build makes the static lab, the reference and one hostile submission per
// mode, the builds at once.
func build(t testing.TB) binaries {
	t.Helper()
	buildOnce.Do(func() {
		var err error
		if buildDir, err = os.MkdirTemp("", "snacklab-isolate-test-*"); err != nil {
			built.err = err
			return
		}
		if netListener, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
			built.err = err
			return
		}
		go func() {
			for {
				c, err := netListener.Accept()
				if err != nil {
					return
				}
				netAccepted.Add(1)
				c.Close()
				netConn <- struct{}{}
			}
		}()
		built.lab = filepath.Join(buildDir, "lab", "lab")
		built.reference = filepath.Join(buildDir, "reference")
		built.hostile = map[string]string{}
		var wg sync.WaitGroup
		errs := make([]error, len(hostileModes)+2)
		wg.Add(2)
		go func() {
			defer wg.Done()
			errs[0] = goBuild(filepath.Join(buildDir, "lab")+"/", "", "-tags=nomutants", "./cmd/lab")
		}()
		go func() {
			defer wg.Done()
			errs[1] = goBuild(built.reference+"/", "", "./cmd/queuectl", "./cmd/sender", "./cmd/receiver")
		}()
		for i, mode := range hostileModes {
			dir := filepath.Join(buildDir, "hostile-"+mode)
			built.hostile[mode] = dir
			wg.Add(1)
			go func() {
				defer wg.Done()
				flags := "-X main.mode=" + mode + " -X main.target=" + netListener.Addr().String() +
					" -X main.judgedUID=" + strconv.Itoa(isolate.LocalJudgedUID)
				if errs[i+2] = goBuild(filepath.Join(dir, "queuectl"), flags, "./internal/isolate/testdata/hostile"); errs[i+2] != nil {
					return
				}
				for _, p := range []string{"sender", "receiver"} {
					if errs[i+2] = copyFile(filepath.Join(dir, "queuectl"), filepath.Join(dir, p)); errs[i+2] != nil {
						return
					}
				}
				// As a learner's directory may be: only its owner may enter.
				errs[i+2] = os.Chmod(dir, 0o700)
			}()
		}
		wg.Wait()
		built.err = errors.Join(errs...)
	})
	if built.err != nil {
		t.Fatalf("building the test's binaries: %v", built.err)
	}
	return built
}

func copyFile(src, dst string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, b, 0o755)
}

// newEngine builds the image; its clean-up checks that the image is gone.
func newEngine(t testing.TB, client *dc.Client) *isolate.Engine {
	t.Helper()
	b := build(t)
	// The bound is for a hung engine, not a slow one: under CI's load (the
	// other packages' tests beside this one) the image's build once took
	// over 2 minutes; on a quiet machine it takes a second or two.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	t0 := time.Now()
	e, err := isolate.New(ctx, b.lab)
	if err != nil {
		t.Fatalf("isolate.New: %v", err)
	}
	t.Logf("image %s built in %v", e.Image(), time.Since(t0).Round(time.Millisecond))
	t.Cleanup(func() {
		if err := e.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		if _, err := client.InspectImage(e.Image()); !errors.Is(err, dc.ErrNoSuchImage) {
			t.Errorf("after Close, image %s: expected no such image, observed %v", e.Image(), err)
		}
	})
	return e
}

// snapshot lists every file under dir with its mode and content hash.
func snapshot(t *testing.T, dir string) string {
	t.Helper()
	var lines []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		sum := ""
		if fi.Mode().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			h := sha256.Sum256(b)
			sum = hex.EncodeToString(h[:8])
		}
		lines = append(lines, fmt.Sprintf("%s %v %d %s %d", p, fi.Mode(), fi.Size(), sum, fi.ModTime().UnixNano()))
		return nil
	})
	if err != nil {
		t.Fatalf("snapshot %s: %v", dir, err)
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// results reads a results.json the grader wrote.
type resultsFile struct {
	Score float64 `json:"score"`
	Tests []struct {
		Number string  `json:"number"`
		Score  float64 `json:"score"`
		Status string  `json:"status"`
		Output string  `json:"output"`
	} `json:"tests"`
}

func readResults(t *testing.T, path string) resultsFile {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("results.json: %v", err)
	}
	var r resultsFile
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("results.json %s: %v", path, err)
	}
	return r
}

// leftovers lists the engine's containers Docker still has.
func leftovers(t *testing.T, client *dc.Client, e *isolate.Engine) []string {
	t.Helper()
	cs, err := client.ListContainers(dc.ListContainersOptions{All: true,
		Filters: map[string][]string{"label": {isolate.LabelEngine + "=" + e.ID()}}})
	if err != nil {
		t.Fatalf("listing containers: %v", err)
	}
	var names []string
	for _, c := range cs {
		names = append(names, strings.Join(c.Names, ",")+" ("+c.State+")")
	}
	return names
}

// ownProcs lists the processes on this machine that run in one of the
// containers this test's engine made (their cgroup names the container's
// id). Other tests and other users' graders may run /sub and /lab
// processes of their own on the same host at the same time: the test
// judges only its own. (It scanned every process for /sub/ and /lab before,
// and failed whenever another grading ran beside it.)
func ownProcs(ids []string) []string {
	ents, _ := os.ReadDir("/proc")
	var out []string
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		cg, err := os.ReadFile("/proc/" + e.Name() + "/cgroup")
		if err != nil {
			continue
		}
		for _, id := range ids {
			if bytes.Contains(cg, []byte(id)) {
				b, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
				out = append(out, e.Name()+": "+strings.ReplaceAll(string(b), "\x00", " "))
				break
			}
		}
	}
	return out
}

type gradeCase struct {
	name    string
	opt     isolate.Options
	timeout time.Duration // of Run's ctx; 0: none beyond the test's
	out     isolate.Outcome
	err     error
	took    time.Duration
}

// TestHostileCohort grades the reference and hostile submissions at once,
// each in its own container, and checks that every hostile one is contained
// and fails with a reason while the reference scores 8/8 in the same run.
func TestHostileCohort(t *testing.T) {
	tier.Slow(t)
	client := needDocker(t)
	b := build(t)
	e := newEngine(t, client)
	stageRoot := t.TempDir()
	outRoot := t.TempDir()

	hostile := func(mode string, o isolate.Options) isolate.Options {
		o.SubmissionBin = b.hostile[mode]
		if o.Limits.CPUs == 0 {
			o.Limits.CPUs = 0.5
		}
		return o
	}
	cases := []*gradeCase{
		{name: "reference", opt: isolate.Options{SubmissionBin: b.reference, StepTimeout: 90 * time.Second}},
		{name: "net", opt: hostile("net", isolate.Options{StepTimeout: 15 * time.Second})},
		{name: "write", opt: hostile("write", isolate.Options{StepTimeout: 15 * time.Second})},
		{name: "forge", opt: hostile("forge", isolate.Options{StepTimeout: 15 * time.Second})},
		{name: "fork", opt: hostile("fork", isolate.Options{StepTimeout: 4 * time.Second, Limits: isolate.Limits{PIDs: 200}})},
		{name: "mem", opt: hostile("mem", isolate.Options{StepTimeout: 15 * time.Second, Limits: isolate.Limits{Memory: 384 << 20}})},
		{name: "sleep-steps", opt: hostile("sleep", isolate.Options{StepTimeout: 3 * time.Second})},
		{name: "sleep-wall", opt: hostile("sleep", isolate.Options{StepTimeout: time.Minute, Limits: isolate.Limits{Wall: 4 * time.Second}})},
		{name: "sleep-cancel", opt: hostile("sleep", isolate.Options{StepTimeout: time.Minute}), timeout: 4 * time.Second},
	}
	before := map[string]string{}
	for _, c := range cases {
		c.opt.Name = c.name
		c.opt.OutDir = filepath.Join(outRoot, c.name)
		c.opt.TempDir = stageRoot
		before[c.name] = snapshot(t, c.opt.SubmissionBin)
	}

	// internal/grade's way in, alongside: two steps of the reference and
	// of a hostile submission through Engine.Runner.
	var runnerRef, runnerHostile []result.Result
	var runnerRefErr, runnerHostileErr error
	acceptedBefore := netAccepted.Load() // the listener outlives a test (-count)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
		defer cancel()
		run := e.Runner(isolate.Limits{CPUs: 0.5})
		steps := []labsteps.Step{labsteps.Steps()[7], labsteps.Steps()[6]} // 8 then 7: the order given is kept
		runnerRef, runnerRefErr = run(ctx, b.reference, steps, 90*time.Second, 0)
		runnerHostile, runnerHostileErr = run(ctx, b.hostile["write"], steps, 10*time.Second, 1)
	}()
	for _, c := range cases {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
			if c.timeout > 0 {
				ctx, cancel = context.WithTimeout(context.Background(), c.timeout)
			}
			defer cancel()
			t0 := time.Now()
			c.out, c.err = e.Run(ctx, c.opt)
			c.took = time.Since(t0)
		}()
	}
	wg.Wait()
	for _, c := range cases {
		t.Logf("%-12s %d/%d in %5.2fs exit %d wall %v oom %v err %v problem %q", c.name, c.out.Passed, len(c.out.Steps),
			c.took.Seconds(), c.out.ExitCode, c.out.WallLimit, c.out.OOMKilled, c.err, c.out.Problem)
	}

	byName := map[string]*gradeCase{}
	for _, c := range cases {
		byName[c.name] = c
	}
	// Every step's output, for looking up what the hostile program printed.
	outputs := func(c *gradeCase) string {
		var all []string
		for _, s := range c.out.Steps {
			all = append(all, s.Output)
		}
		return strings.Join(all, "\n")
	}
	// failsEverything: a hostile submission fails every step, each with a
	// reason, in the Outcome and in the results.json written for it.
	failsEverything := func(t *testing.T, c *gradeCase) {
		t.Helper()
		if c.err != nil {
			t.Fatalf("Run: %v", c.err)
		}
		if len(c.out.Steps) != 8 || c.out.Passed != 0 {
			t.Errorf("expected 8 steps, none passed; observed %d passed of %d", c.out.Passed, len(c.out.Steps))
		}
		for _, s := range c.out.Steps {
			if s.Pass || s.Reason == "" {
				t.Errorf("step %d: expected a failure with a reason, observed pass=%v reason %q", s.Num, s.Pass, s.Reason)
			}
		}
		r := readResults(t, c.out.Results)
		// One test per part of each step: at least one per step.
		if r.Score != 0 || len(r.Tests) < 8 {
			t.Errorf("results.json: expected score 0 over at least 8 tests (one per part), observed %v over %d", r.Score, len(r.Tests))
		}
		for _, tt := range r.Tests {
			if tt.Status != "failed" || !strings.Contains(tt.Output, "✗ ") {
				t.Errorf("results.json step %s: expected failed with a ✗ reason, observed %s: %q", tt.Number, tt.Status, tt.Output)
			}
		}
		if _, err := os.Stat(c.out.JUnit); err != nil {
			t.Errorf("junit.xml: %v", err)
		}
	}

	t.Run("reference scores 8/8 alongside them", func(t *testing.T) {
		c := byName["reference"]
		if c.err != nil {
			t.Fatalf("Run: %v", c.err)
		}
		if c.out.Passed != 8 || c.out.ExitCode != 0 || c.out.Problem != "" {
			for _, s := range c.out.Steps {
				if !s.Pass {
					t.Logf("step %d: %s", s.Num, s.Output)
				}
			}
			t.Fatalf("expected 8/8, exit 0, no problem; observed %d/8, exit %d, problem %q", c.out.Passed, c.out.ExitCode, c.out.Problem)
		}
		for _, s := range c.out.Steps {
			if !s.Reported {
				t.Errorf("step %d: expected reported by the lab", s.Num)
			}
		}
		if r := readResults(t, c.out.Results); r.Score != 8 {
			t.Errorf("results.json: expected score 8, observed %v", r.Score)
		}
		// Step 7 waits on /proc/PID/task/*/schedstat of the senders: it
		// passed, so /proc in the container's PID namespace serves the lab.
		lr := c.out.LabResults()
		if len(lr) != 8 || !lr[6].Pass || len(lr[6].Checks) < 2 {
			t.Errorf("LabResults: expected step 7 passed with its checks, observed %+v", lr[6])
		}
	})

	t.Run("network: no connection reaches the host, no DNS answer", func(t *testing.T) {
		c := byName["net"]
		failsEverything(t, c)
		if n := netAccepted.Load() - acceptedBefore; n != 0 {
			t.Errorf("the host listener %s: expected no connection from the container, observed %d", netListener.Addr(), n)
		}
		all := outputs(c)
		t.Logf("the program reported, in the container: %s", reportLine(all, "hostile net: "))
		for _, want := range []string{
			"hostile net: dial " + netListener.Addr().String() + "=ECONNREFUSED", // the container's own loopback
			")=FAIL ifaces", // the lookup, asked of the container's loopback (no resolv.conf, or 127.0.0.1)
			"ifaces=lo",
		} {
			if !strings.Contains(all, want) {
				t.Errorf("expected the program's report to contain %q; outputs:\n%s", want, clip(all))
			}
		}
		if strings.Contains(all, "=CONNECTED") || strings.Contains(all, "RESOLVED") || strings.Contains(all, "ifaces=lo,") {
			t.Errorf("the program reached something:\n%s", clip(all))
		}
		// The control: the same program outside the container does reach
		// the listener, so the zero above is the container's doing.
		cmd := exec.Command(filepath.Join(b.hostile["net"], "sender"))
		cmd.Env = append(os.Environ(), "HOSTILE_NO_DNS=1")
		out, _ := cmd.CombinedOutput()
		if !bytes.Contains(out, []byte("=CONNECTED")) {
			t.Errorf("control run on the host: expected CONNECTED, observed %s", out)
		}
		select {
		case <-netConn:
		case <-time.After(10 * time.Second):
		}
		if n := netAccepted.Load() - acceptedBefore; n != 1 {
			t.Errorf("control run on the host: expected the listener to count 1 connection, observed %d", n)
		}
	})

	t.Run("writes: nothing writable but scratch, the grader's output out of reach", func(t *testing.T) {
		c := byName["write"]
		failsEverything(t, c)
		all := outputs(c)
		t.Logf("the program reported, in the container: %s", reportLine(all, "hostile write: "))
		// The root is root's and writable by root alone (the lab took its
		// group bits off: /mode=705); the submission's programs are a
		// read-only mount.
		for _, want := range []string{"/sub/pwned=EROFS", "chmod=EROFS", "/pwned=EACCES", "/etc/pwned=EACCES", "chmod /=EPERM", "/mode=705", "writable=none",
			"/proc/1/fd/1=EACCES", "/proc/1/fd/2=EACCES"} {
			if !strings.Contains(all, want) {
				t.Errorf("expected the program's report to contain %q; outputs:\n%s", want, clip(all))
			}
		}
		if strings.Contains(all, "=OK") {
			t.Errorf("a write succeeded:\n%s", clip(all))
		}
	})

	t.Run("judge apart: the judged reaches no log, trace, lab.log or lab binary", func(t *testing.T) {
		c := byName["forge"]
		failsEverything(t, c)
		if c.out.NotGraded {
			t.Errorf("got not graded (%q); want the lab's own results: nothing stalled it", c.out.Problem)
		}
		all := outputs(c)
		t.Logf("the program reported, in the container: %s", reportLine(all, "hostile forge: "))
		for _, want := range []string{"fifo ../lab.log=EACCES", "symlink ../logs/01-queuectl.stdout=EACCES",
			"list ../logs=EACCES", "read /lab=EACCES", "mkdir /work/x=EACCES"} {
			if !strings.Contains(all, want) {
				t.Errorf("expected the program's report to contain %q; outputs:\n%s", want, clip(all))
			}
		}
		if strings.Contains(all, "=OK") || strings.Contains(all, "REFERENCE-FOUND") || strings.Contains(all, "append ") {
			t.Errorf("an attack got through:\n%s", clip(all))
		}
	})

	t.Run("fork bomb: the pids limit holds it", func(t *testing.T) {
		c := byName["fork"]
		failsEverything(t, c)
		for _, s := range c.out.Steps {
			t.Logf("step %d: %s", s.Num, s.Reason)
		}
	})

	t.Run("memory: the memory limit kills the eater", func(t *testing.T) {
		c := byName["mem"]
		failsEverything(t, c)
		if !c.out.OOMKilled {
			t.Errorf("expected Docker to report an OOM kill in the container")
		}
		if all := outputs(c); !strings.Contains(all, "SIGKILL") {
			t.Errorf("expected a step to report a process killed by SIGKILL; outputs:\n%s", clip(all))
		}
	})

	t.Run("sleep forever: the steps' time limits", func(t *testing.T) {
		c := byName["sleep-steps"]
		failsEverything(t, c)
		for _, s := range c.out.Steps {
			if !s.Reported || !strings.Contains(s.Output, "time limit of 3s reached") {
				t.Errorf("step %d: expected reported by the lab as over its time limit; observed reported=%v %q", s.Num, s.Reported, s.Output)
			}
		}
	})

	t.Run("sleep forever: the wall-clock limit", func(t *testing.T) {
		c := byName["sleep-wall"]
		failsEverything(t, c)
		if !c.out.WallLimit || c.out.ExitCode != -1 {
			t.Errorf("expected killed at the wall-clock limit; observed wall=%v exit %d", c.out.WallLimit, c.out.ExitCode)
		}
		for _, s := range c.out.Steps {
			if s.Reported || !strings.HasPrefix(s.Reason, isolate.WallReason) {
				t.Errorf("step %d: expected not reported, reason %q…; observed reported=%v %q", s.Num, isolate.WallReason, s.Reported, s.Reason)
			}
		}
		if c.took > 30*time.Second {
			t.Errorf("the wall-clock limit of 4s took %v to enforce", c.took)
		}
	})

	t.Run("grader interrupted: the container goes anyway", func(t *testing.T) {
		c := byName["sleep-cancel"]
		if !errors.Is(c.err, context.DeadlineExceeded) {
			t.Errorf("expected Run to fail with the context's deadline, observed %v", c.err)
		}
	})

	t.Run("Runner: labsteps results for internal/grade", func(t *testing.T) {
		if runnerRefErr != nil || runnerHostileErr != nil {
			t.Fatalf("Runner: %v; %v", runnerRefErr, runnerHostileErr)
		}
		if len(runnerRef) != 2 || runnerRef[0].Step.Num != 8 || runnerRef[1].Step.Num != 7 || !runnerRef[0].Pass || !runnerRef[1].Pass {
			t.Errorf("reference: expected steps 8 and 7 passed, in that order; observed %+v", runnerRef)
		}
		for _, r := range runnerHostile {
			if r.Pass || r.Failed() == nil || !strings.Contains(r.Output(), "hostile write: ") {
				t.Errorf("hostile step %d: expected failed with its check and the program's report; observed %s", r.Step.Num, r.Output())
			}
		}
	})

	t.Run("nothing left behind", func(t *testing.T) {
		for _, c := range cases {
			if got := snapshot(t, c.opt.SubmissionBin); got != before[c.name] {
				t.Errorf("%s: the submission's directory changed:\nbefore:\n%s\nafter:\n%s", c.name, before[c.name], got)
			}
		}
		if l := leftovers(t, client, e); len(l) > 0 {
			t.Errorf("containers left: %v", l)
		}
		if ents, _ := os.ReadDir(stageRoot); len(ents) > 0 {
			t.Errorf("staging dirs left in %s: %d", stageRoot, len(ents))
		}
		if p := ownProcs(e.Made()); len(p) > 0 {
			t.Errorf("processes of the graded containers still running on the host: %v", p)
		}
	})
}

// reportLine is the hostile program's report as the lab quoted it.
func reportLine(all, prefix string) string {
	i := strings.Index(all, prefix)
	if i < 0 {
		return "(none)"
	}
	line, _, _ := strings.Cut(all[i:], "\n")
	line, _, _ = strings.Cut(line, "; all of it in")
	return strings.TrimSuffix(line, ")")
}

func clip(s string) string {
	if len(s) > 6000 {
		return s[:3000] + "\n…\n" + s[len(s)-3000:]
	}
	return s
}

// BenchmarkIsolationOverhead measures, in one run, what isolation costs
// per submission: the reference graded 5 times by `lab run` on the host and
// 5 times in containers (default limits: 1 CPU, and 2 CPUs), interleaved;
// medians and ratios against the host run of the same run. A measurement,
// not a test (15 whole lab runs, over three minutes here):
//
//	go test ./internal/isolate -run '^$' -bench IsolationOverhead -benchtime 1x -v
func BenchmarkIsolationOverhead(bm *testing.B) {
	client := needDocker(bm)
	b := build(bm)
	e := newEngine(bm, client)
	const n = 5
	var host, iso, isoAll []time.Duration
	// No time limit of the benchmark's own: on a loaded machine (load 23
	// per core once) the runs are slow, and a slow machine is no failure.
	// The lab bounds each step (--timeout), the engine each container (its
	// wall-clock limit), and go test -timeout the whole.
	ctx := context.Background()
	for range bm.N {
		for i := range n {
			dir := bm.TempDir()
			t0 := time.Now()
			cmd := exec.CommandContext(ctx, b.lab, "run", "--bin", b.reference, "--results", filepath.Join(dir, "results.json"),
				"--junit", filepath.Join(dir, "junit.xml"), "--work", dir)
			if out, err := cmd.CombinedOutput(); err != nil {
				if bytes.Contains(out, []byte("TIMEOUT  ")) {
					bm.Skipf("lab run on the host: a step reached its time limit: this machine is too busy to measure (%v)", err)
				}
				bm.Fatalf("lab run on the host: %v\n%s", err, out)
			}
			host = append(host, time.Since(t0))

			for _, cpus := range []float64{0, 2} {
				t0 = time.Now()
				out, err := e.Run(ctx, isolate.Options{SubmissionBin: b.reference, OutDir: filepath.Join(dir, fmt.Sprint("iso", cpus)),
					Name: fmt.Sprintf("overhead-%d", i), TempDir: dir, Limits: isolate.Limits{CPUs: cpus}})
				if err == nil && out.Passed != 8 && slowOnly(out) {
					bm.Skipf("isolated run (CPUs %v): %d/8, the others at their time limit: this machine is too busy to measure", cpus, out.Passed)
				}
				if err != nil || out.Passed != 8 {
					bm.Fatalf("isolated run (CPUs %v): %v, %d/8 passed, problem %q", cpus, err, out.Passed, out.Problem)
				}
				if cpus == 0 {
					iso = append(iso, time.Since(t0))
				} else {
					isoAll = append(isoAll, time.Since(t0))
				}
			}
		}
	}
	mh, mi, ma := median(host), median(iso), median(isoAll)
	bm.ReportMetric(mi.Seconds()/mh.Seconds(), "isolated/host")
	bm.ReportMetric(ma.Seconds()/mh.Seconds(), "isolated-2cpu/host")
	bm.Logf("reference, 8 steps, median of %d: lab run on the host %.3fs; isolated (1 CPU) %.3fs = %.2f×; isolated (2 CPUs) %.3fs = %.2f×",
		len(host), mh.Seconds(), mi.Seconds(), mi.Seconds()/mh.Seconds(), ma.Seconds(), ma.Seconds()/mh.Seconds())
	bm.Logf("host %v\nisolated 1 CPU %v\nisolated 2 CPUs %v", host, iso, isoAll)
}

func median(ds []time.Duration) time.Duration {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

// TestNewRefusesALabThatDoesNotProtectItsOutput: a lab binary that does not
// make itself non-dumpable would let the submission write into the stream
// the results leave by, so New refuses it before touching Docker. Here the
// "lab" is the reference queuectl: static, but no lab.
func TestNewRefusesALabThatDoesNotProtectItsOutput(t *testing.T) {
	b := build(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := isolate.New(ctx, filepath.Join(b.reference, "queuectl"))
	if err == nil || !strings.Contains(err.Error(), "does not protect its output when isolated") {
		t.Errorf("expected a refusal, observed %v", err)
	}
}

// slowOnly: every failed step of o failed at a time limit (its own, a
// wait that ran out, said TIMEOUT, or the container's): a slow machine,
// not a defect.
func slowOnly(o isolate.Outcome) bool {
	for _, s := range o.Steps {
		timedOut := strings.Contains(s.Reason, "time limit") || strings.Contains(s.Reason, "TIMEOUT") || strings.Contains(s.Reason, "timed out")
		if !s.Pass && !timedOut && !strings.HasPrefix(s.Reason, isolate.WallReason) {
			return false
		}
	}
	return true
}
