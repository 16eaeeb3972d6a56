package isolate_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"snacklab/internal/isolate"
	"snacklab/internal/tier"
)

// TestLocalEngineSeparatesJudgeAndJudged grades inside a boundary someone
// else made (--isolate pod): no Docker, the lab as root and the programs
// as other uids. The reference keeps 8/8; a submission that leaves a copy
// of itself running outside every process group (setsid) fails every step
// and leaves no process of the judged uids behind, and a submission graded
// beside it is not disturbed.
func TestLocalEngineSeparatesJudgeAndJudged(t *testing.T) {
	tier.Slow(t)
	if os.Geteuid() != 0 {
		t.Skip("needs root: the judge starts the programs as other uids")
	}
	b := build(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	e, err := isolate.NewLocal(ctx, b.lab)
	if err != nil {
		t.Fatalf("NewLocal: %v", err)
	}
	defer e.Close()
	stage := t.TempDir()
	// The judged reach their programs through the test's temp dirs, as
	// through a pod's /tmp.
	for _, d := range []string{filepath.Dir(stage), stage} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	type run struct {
		out isolate.Outcome
		err error
	}
	runs := map[string]*run{"reference": {}, "escape": {}, "forge": {}}
	bins := map[string]string{"reference": b.reference, "escape": b.hostile["escape"], "forge": b.hostile["forge"]}
	timeouts := map[string]time.Duration{"reference": 3 * time.Minute, "escape": 10 * time.Second, "forge": 15 * time.Second}
	done := make(chan struct{})
	for name, r := range runs {
		go func() {
			defer func() { done <- struct{}{} }()
			r.out, r.err = e.Run(ctx, isolate.Options{SubmissionBin: bins[name], Name: name, StepTimeout: timeouts[name],
				TempDir: stage, OutDir: filepath.Join(t.TempDir(), name)})
		}()
	}
	for range runs {
		<-done
	}
	ref, esc, forge := runs["reference"], runs["escape"], runs["forge"]
	if ref.err != nil || esc.err != nil || forge.err != nil {
		t.Fatalf("Run: reference %v, escape %v, forge %v", ref.err, esc.err, forge.err)
	}
	// The forger attacks the judge from the judged's seat, as in a
	// container: a FIFO at lab.log, links where the lab writes its logs,
	// fsync lines appended to its trace. Every attack is refused by the
	// identities alone (no mount namespace here), and the lab's own
	// results fail it.
	if forge.out.Passed != 0 || forge.out.NotGraded || len(forge.out.Steps) != 8 {
		t.Errorf("the forger: got %d of %d passed, not graded %v (%q); want every step failed by the lab's own results",
			forge.out.Passed, len(forge.out.Steps), forge.out.NotGraded, forge.out.Problem)
	}
	var forged []string
	for _, s := range forge.out.Steps {
		forged = append(forged, s.Output)
	}
	report := reportLine(strings.Join(forged, "\n"), "hostile forge: ")
	t.Logf("the forger reported, as the judged: %s", report)
	for _, want := range []string{"fifo ../lab.log=EACCES", "symlink ../logs/01-queuectl.stdout=EACCES", "list ../logs=EACCES"} {
		if !strings.Contains(report, want) {
			t.Errorf("the forger's report %q lacks %q", report, want)
		}
	}
	if report == "" || strings.Contains(report, "=OK") || strings.Contains(report, "REFERENCE-FOUND") || strings.Contains(report, "append ") {
		t.Errorf("an attack on the judge got through (or the forger never reported): %q", report)
	}
	if ref.out.Passed != 8 || len(ref.out.Steps) != 8 {
		for _, s := range ref.out.Steps {
			t.Logf("reference step %d: pass %v: %s", s.Num, s.Pass, s.Reason)
		}
		t.Errorf("the reference beside the escaper: got %d of %d steps, want 8 of 8 (problem %q)", ref.out.Passed, len(ref.out.Steps), ref.out.Problem)
	}
	if esc.out.Passed != 0 || esc.out.NotGraded {
		t.Errorf("the escaper: got %d passed, not graded %v (%q); want every step failed by the lab's own results", esc.out.Passed, esc.out.NotGraded, esc.out.Problem)
	}
	var all []string
	for _, s := range esc.out.Steps {
		all = append(all, s.Output)
	}
	if line := reportLine(strings.Join(all, "\n"), "hostile escape: "); !strings.Contains(line, "(OK)") {
		t.Errorf("the escaper's report: got %q, want it to have left a process running (OK)", line)
	}
	if left := judgedProcesses(); len(left) > 0 {
		t.Errorf("processes of the judged uids left after both runs: %s", strings.Join(left, "; "))
	}
	// The copy it left ran as the judged: it is gone too.
	line := reportLine(strings.Join(all, "\n"), "hostile escape: ")
	if f := strings.Fields(strings.TrimPrefix(line, "hostile escape: left pid ")); len(f) > 0 {
		if st, err := os.ReadFile("/proc/" + f[0] + "/status"); err == nil && !strings.Contains(string(st), "zombie") {
			t.Errorf("the escaper's setsid copy, pid %s, still runs after the grading:\n%s", f[0], st)
		}
	}
}

// judgedProcesses lists the live processes whose uid is one a local
// engine hands to the judged (isolate.LocalJudgedUID and the blocks above
// it; no other test uses them).
func judgedProcesses() []string {
	var out []string
	pids, _ := filepath.Glob("/proc/[0-9]*/status")
	for _, p := range pids {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		var uid int
		var state string
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Fields(line); len(f) > 1 && f[0] == "Uid:" {
				uid, _ = strconv.Atoi(f[1])
			} else if len(f) > 1 && f[0] == "State:" {
				state = f[1]
			}
		}
		if uid >= isolate.LocalJudgedUID && uid < isolate.LocalJudgedUID+64 && state != "Z" && state != "X" {
			cmd, _ := os.ReadFile(filepath.Join(filepath.Dir(p), "cmdline"))
			out = append(out, filepath.Base(filepath.Dir(p))+" uid "+strconv.Itoa(uid)+": "+strings.ReplaceAll(string(cmd), "\x00", " "))
		}
	}
	return out
}
