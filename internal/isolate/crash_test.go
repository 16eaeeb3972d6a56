package isolate_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"snacklab/internal/crash"
	"snacklab/internal/isolate"
	"snacklab/internal/powercut"
	"snacklab/internal/tier"
	"snacklab/labsteps/mutants"
)

// crashReportText is a report lab crash --json writes, for seed 7 and the
// enqueue program, ok or not.
func crashReportText(t *testing.T, ok bool) string {
	t.Helper()
	rep := crash.Report{OK: ok, Bin: "/sub", Seed: 7, Programs: []crash.ProgramReport{{Program: "enqueue"}},
		Points: []crash.Point{}, Violations: []crash.Violation{}}
	var b bytes.Buffer
	if err := rep.WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// powerCutReportText is a report lab crash --power-cut --json writes, for
// seed 7 and the enqueue program.
func powerCutReportText(t *testing.T, ok bool) string {
	t.Helper()
	rep := crash.PowerCutReport{OK: ok, Bin: "/sub", Seed: 7, Budget: powercut.Small, Programs: []crash.CutProgram{{Program: "enqueue"}},
		Violations: []crash.CutViolation{}}
	var b bytes.Buffer
	if err := rep.WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// Only a report the lab stood by counts: killed at the wall, no marker, no
// JSON, an exit code that contradicts the verdict, another seed's report —
// each is not graded, with the reason.
func TestCrashInterpret(t *testing.T) {
	co := isolate.CrashOptions{Seed: 7, Programs: []string{"enqueue"}}
	good, bad := crashReportText(t, true), crashReportText(t, false)
	m := isolate.Marker + "\n"
	pc, pcBad := powerCutReportText(t, true), powerCutReportText(t, false)
	for _, c := range []struct {
		name, stderr string
		code         int
		wall         bool
		want         string // in NotGraded; "" a report
		ok           bool
		powerCut     bool
	}{
		{"power cut ok", m + pc, 0, false, "", true, true},
		{"power cut violations", m + pcBad, 1, false, "", false, true},
		{"power cut but exit 0", m + pcBad, 0, false, "ok false with exit 0", false, true},
		{"crash points for a power cut", m + good, 0, false, "unknown field", false, true},
		{"a power cut for crash points", m + pc, 0, false, "unknown field", false, false},
		{"ok", m + good, 0, false, "", true, false},
		{"violations", m + bad + "lab: crash: 1 of 3 failed\n", 1, false, "", false, false},
		{"wall", m + good, 0, true, isolate.WallReason, false, false},
		{"no marker", good, 0, false, "did not start as an isolated grader", false, false},
		{"no report", m + "lab crash: SKIPPED: crash points need ptrace\n", 0, false, "no JSON report", false, false},
		{"cut report", m + good[:len(good)/2], 0, false, "the report", false, false},
		{"ok but exit 1", m + good, 1, false, "ok true with exit 1", false, false},
		{"violations but exit 0", m + bad, 0, false, "ok false with exit 0", false, false},
		{"died", m + bad, 2, false, "exit 2", false, false},
		{"other seed", m + strings.Replace(good, `"seed": 7`, `"seed": 8`, 1), 0, false, "seed 8", false, false},
		{"unknown field", m + strings.Replace(good, `"ok": true`, `"ok": true, "score": 100`, 1), 0, false, "unknown field", false, false},
	} {
		co.PowerCut = c.powerCut
		out := isolate.InterpretCrash(co, c.stderr, c.code, c.wall)
		got, ok := out.Report != nil, out.Report != nil && out.Report.OK
		if c.powerCut {
			got, ok = out.PowerCut != nil, out.PowerCut != nil && out.PowerCut.OK
		}
		switch {
		case c.want == "" && (!got || out.NotGraded != "" || ok != c.ok):
			t.Errorf("%s: got a report %v (ok %v), not graded %q; want a report, ok %v", c.name, got, ok, out.NotGraded, c.ok)
		case c.want != "" && (out.Report != nil || out.PowerCut != nil || !strings.Contains(out.NotGraded, c.want) || !strings.Contains(out.NotGraded, "not graded")):
			t.Errorf("%s: got a report %v, not graded %q; want no report and a reason with %q", c.name, got, out.NotGraded, c.want)
		}
	}
}

// In a grading container lab crash runs as the judge and the programs as
// the judged: the reference survives every crash point of its enqueue and a
// short soak; a mutant that answers before its commit is synced (synchronous
// OFF) does not; a run past its wall-clock limit is not graded.
func TestCrashIsolated(t *testing.T) {
	tier.Slow(t)
	client := needDocker(t)
	b := build(t)
	if !mutants.Available() {
		t.Skip("this copy of the module has no mutants")
	}
	e := newEngine(t, client)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	co := isolate.CrashOptions{SubmissionBin: b.reference, Name: "reference", Seed: 7, Kills: 10, Programs: []string{"enqueue"}}
	t0 := time.Now()
	out, err := e.Crash(ctx, co)
	if err != nil {
		t.Fatalf("Crash: %v", err)
	}
	t.Logf("reference: %v, exit %d", time.Since(t0).Round(time.Second), out.ExitCode)
	if out.Report == nil || !out.Report.OK || len(out.Report.Points) < 5 {
		t.Fatalf("the reference, isolated: not graded %q, report %+v; stderr %s", out.NotGraded, out.Report, out.Stderr)
	}

	bin := buildMutant(t, ctx, "synchronous-off")
	co.SubmissionBin, co.Name = bin, "synchronous-off"
	t0 = time.Now()
	out, err = e.Crash(ctx, co)
	if err != nil {
		t.Fatalf("Crash: %v", err)
	}
	t.Logf("synchronous-off: %v, exit %d", time.Since(t0).Round(time.Second), out.ExitCode)
	if out.Report == nil || out.Report.OK || out.ExitCode != 1 {
		t.Fatalf("synchronous-off, isolated: not graded %q, report %+v; want a report with violations", out.NotGraded, out.Report)
	}
	if v := out.Report.Violations[0]; v.Invariant != crash.InvDurable {
		t.Errorf("synchronous-off's first violation: %+v, want %s", v, crash.InvDurable)
	}

	co.SubmissionBin, co.Name, co.Limits.Wall = b.reference, "walled", 3*time.Second
	out, err = e.Crash(ctx, co)
	if err != nil {
		t.Fatalf("Crash: %v", err)
	}
	if out.Report != nil || !out.WallLimit || !strings.Contains(out.NotGraded, isolate.WallReason) {
		t.Errorf("a run past its wall: report %v, wall %v, not graded %q; want no report and the wall-clock limit", out.Report, out.WallLimit, out.NotGraded)
	}
}

// The power cut in a grading container, the same separation: the
// reference's enqueue survives every state of the small budget; a queue
// that commits with synchronous=FULL (the journal's removal never synced
// into the directory) loses an answered acceptance to one.
func TestPowerCutIsolated(t *testing.T) {
	tier.Slow(t)
	client := needDocker(t)
	b := build(t)
	if !mutants.Available() {
		t.Skip("this copy of the module has no mutants")
	}
	e := newEngine(t, client)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	co := isolate.CrashOptions{SubmissionBin: b.reference, Name: "reference", Seed: 5, Programs: []string{"enqueue"}, PowerCut: true}
	t0 := time.Now()
	out, err := e.Crash(ctx, co)
	if err != nil {
		t.Fatalf("Crash: %v", err)
	}
	t.Logf("reference: %v, exit %d", time.Since(t0).Round(time.Second), out.ExitCode)
	if out.PowerCut == nil || !out.PowerCut.OK || out.PowerCut.Programs[0].Checked < 7 {
		t.Fatalf("the reference, isolated: not graded %q, report %+v; stderr %s", out.NotGraded, out.PowerCut, out.Stderr)
	}
	bin := buildMutant(t, ctx, "queue-synchronous-full")
	co.SubmissionBin, co.Name = bin, "queue-synchronous-full"
	t0 = time.Now()
	if out, err = e.Crash(ctx, co); err != nil {
		t.Fatalf("Crash: %v", err)
	}
	t.Logf("queue-synchronous-full: %v, exit %d", time.Since(t0).Round(time.Second), out.ExitCode)
	if out.PowerCut == nil || out.PowerCut.OK || out.ExitCode != 1 || len(out.PowerCut.Violations) == 0 {
		t.Fatalf("queue-synchronous-full, isolated: not graded %q, report %+v; want a report with violations", out.NotGraded, out.PowerCut)
	}
	if v := out.PowerCut.Violations[0]; v.Invariant != crash.InvAnswered {
		t.Errorf("queue-synchronous-full's first violation: %s, want %s", v.Invariant, crash.InvAnswered)
	}
}

// buildMutant builds a bundled mutant's three programs, static.
func buildMutant(t *testing.T, ctx context.Context, name string) string {
	t.Helper()
	ms, err := mutants.All()
	if err != nil {
		t.Fatal(err)
	}
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if m.Name == name {
			bin, err := m.Build(ctx, root, t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			return bin
		}
	}
	t.Fatalf("no mutant %s", name)
	return ""
}
