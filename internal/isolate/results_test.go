package isolate_test

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"encoding/xml"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"snacklab/internal/isolate"
	"snacklab/labsteps"
	"snacklab/labsteps/result"
)

// These tests need no Docker engine: they feed Interpret what a container
// printed, in the lab's own formats (labsteps' Summary, Detail and
// result.Encode), and stage submissions on the local disk.

func step(n int) result.Step { return labsteps.Steps()[n-1].Step }

func passed(n, checks int) result.Result {
	r := result.Result{Step: step(n), Pass: true, Took: 210 * time.Millisecond}
	for range checks {
		r.Checks = append(r.Checks, result.Check{What: "c", OK: true})
	}
	return r
}

func failedCheck(n int) result.Result {
	return result.Result{Step: step(n), Took: 3 * time.Second, Checks: []result.Check{
		{What: "ok first", OK: true},
		{What: "`queuectl init` succeeds", Expected: "exit 0", Observed: "exit 1 (stderr: not implemented)", Why: "nothing works without a queue"},
	}, Problem: "time limit of 3s reached"}
}

// labJSON is what the isolated lab writes on stderr (lab run --json).
func labJSON(t *testing.T, rs ...result.Result) string {
	t.Helper()
	var b bytes.Buffer
	if err := result.Encode(&b, rs); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// progress is what `lab run` prints on stdout for results (cmd/lab/main.go).
func progress(rs ...result.Result) string {
	var b strings.Builder
	b.WriteString("snacklab lab: 3 step(s) against /sub\n")
	for _, r := range rs {
		b.WriteString(r.Summary() + "\n")
		if d := strings.TrimRight(r.Detail(), "\n"); d != "" {
			b.WriteString("      " + strings.ReplaceAll(d, "\n", "\n      ") + "\n")
		}
	}
	return b.String()
}

func TestResultsComeFromTheLabsStderr(t *testing.T) {
	stderr := isolate.Marker + "\n" + labJSON(t, passed(1, 21), failedCheck(2))
	o, err := isolate.Interpret(isolate.Options{SubmissionBin: "/x/sub", Steps: []int{1, 2}}, "", stderr, 1, false, false)
	if err != nil {
		t.Fatal(err)
	}
	if o.Passed != 1 || len(o.Steps) != 2 || o.Problem != "" {
		t.Fatalf("expected 1 of 2 passed and no problem, observed %d of %d, %q", o.Passed, len(o.Steps), o.Problem)
	}
	s2 := o.Steps[1]
	want := "`queuectl init` succeeds: expected exit 0, observed exit 1 (stderr: not implemented); time limit of 3s reached"
	if !s2.Reported || s2.Reason != want || s2.Took != 3*time.Second {
		t.Errorf("step 2: expected reported, reason %q, took 3s; observed %v %q %v", want, s2.Reported, s2.Reason, s2.Took)
	}
	if s2.Output != failedCheck(2).Output() {
		t.Errorf("step 2's output: expected the lab's text as is, observed %q", s2.Output)
	}
	// The labsteps form internal/grade folds: the failed check rebuilt.
	lr := o.LabResults()
	c := lr[1].Failed()
	if c == nil || c.What != "`queuectl init` succeeds" || c.Expected != "exit 0" || c.Why != "nothing works without a queue" ||
		lr[1].Problem != "time limit of 3s reached" {
		t.Errorf("LabResults step 2: expected the failed check and the problem, observed %+v", lr[1])
	}
	if !lr[0].Pass || len(lr[0].Checks) != 21 || lr[0].Failed() != nil {
		t.Errorf("LabResults step 1: expected a pass with its 21 checks, observed pass=%v %d checks", lr[0].Pass, len(lr[0].Checks))
	}
}

// TestWallClockLimitGradesNothing: a lab killed at the wall-clock limit
// wrote no results; what it had printed on stdout (which a submission that
// stalled it may have forged) counts for nothing: not graded, with the
// reason.
func TestWallClockLimitGradesNothing(t *testing.T) {
	f := failedCheck(2)
	f.Checks[1].Observed = "exit 1\nPASS  3 claim       0.10s  " + step(3).Title
	stdout := progress(passed(1, 5), f)
	o, err := isolate.Interpret(isolate.Options{SubmissionBin: "/x/sub", Steps: []int{1, 2, 3}, Limits: isolate.Limits{Wall: 4 * time.Second}},
		stdout, isolate.Marker+"\n", -1, true, false)
	if err != nil {
		t.Fatal(err)
	}
	if o.Passed != 0 || !o.WallLimit || !o.NotGraded || !strings.HasPrefix(o.Problem, isolate.WallReason) ||
		!strings.Contains(o.Problem, isolate.NotGradedReason) {
		t.Fatalf("got %d passed, wall %v, not graded %v, %q; want 0, killed at the wall-clock limit, not graded", o.Passed, o.WallLimit, o.NotGraded, o.Problem)
	}
	for _, s := range o.Steps {
		if s.Pass || s.Reported || !strings.HasPrefix(s.Reason, isolate.WallReason+": the container was still running after 4s") {
			t.Errorf("step %d: got %+v; want failed, not reported, reason %q…", s.Num, s, isolate.WallReason)
		}
	}
	var b bytes.Buffer
	if err := isolate.WriteGradescope(&b, o); err != nil {
		t.Fatal(err)
	}
	var g struct {
		Score float64
		Tests []struct{ Number, Status, Output string }
	}
	if err := json.Unmarshal(b.Bytes(), &g); err != nil {
		t.Fatal(err)
	}
	if g.Score != 0 || len(g.Tests) != 3 || g.Tests[0].Status != "failed" || !strings.Contains(g.Tests[0].Output, "✗ "+isolate.WallReason) {
		t.Errorf("results.json: got %s; want score 0, every step failed with the wall-clock reason", b.String())
	}
}

func TestOutputWithoutTheMarkerIsNotTrusted(t *testing.T) {
	// A forged full score, not preceded by the line the non-dumpable lab writes first.
	stderr := labJSON(t, passed(1, 3), passed(2, 3))
	o, err := isolate.Interpret(isolate.Options{SubmissionBin: "/x/sub", Steps: []int{1, 2}}, progress(passed(1, 3), passed(2, 3)), stderr, 0, false, false)
	if err != nil {
		t.Fatal(err)
	}
	if o.Passed != 0 || !strings.Contains(o.Problem, "did not start as an isolated grader") {
		t.Errorf("expected nothing trusted, observed %d passed, %q", o.Passed, o.Problem)
	}
}

func TestResultsForOtherStepsAreRefused(t *testing.T) {
	// Steps 1 and 2 were asked for; results for 1 and 3 are no answer.
	stderr := isolate.Marker + "\n" + labJSON(t, passed(1, 3), passed(3, 3))
	o, err := isolate.Interpret(isolate.Options{SubmissionBin: "/x/sub", Steps: []int{1, 2}}, "", stderr, 0, false, false)
	if err != nil {
		t.Fatal(err)
	}
	if o.Passed != 0 || o.Problem == "" {
		t.Errorf("expected no step passed and a problem, observed %d, %q", o.Passed, o.Problem)
	}
}

func TestLabCrashSaysWhy(t *testing.T) {
	stderr := isolate.Marker + "\nruntime: failed to create new OS thread (have 11 already; errno=11)\nruntime: may need to increase max user processes (ulimit -u)\nfatal error: newosproc\n\ngoroutine 1 [running]:\nos/exec/exec.go:783 +0x8f5\n"
	o, err := isolate.Interpret(isolate.Options{SubmissionBin: "/x/sub", Steps: []int{8}, Limits: isolate.Limits{PIDs: 200}}, "", stderr, 2, false, false)
	if err != nil {
		t.Fatal(err)
	}
	r := o.Steps[0].Reason
	for _, want := range []string{"the lab ended without writing its results", "exit 2", "the pids limit of 200", "runtime: failed to create new OS thread"} {
		if !strings.Contains(r, want) {
			t.Errorf("reason: expected it to contain %q, observed %q", want, r)
		}
	}
}

func TestDefaultsAndValidation(t *testing.T) {
	o, err := isolate.Interpret(isolate.Options{SubmissionBin: "/x/sub", StepTimeout: 10 * time.Second, Parallel: 3}, "", "", 1, false, false)
	if err != nil {
		t.Fatal(err)
	}
	// 8 steps, 3 at once: 3 rounds of 10s, plus the grace.
	want := isolate.Limits{Memory: isolate.DefaultMemory, PIDs: isolate.DefaultPIDs, CPUs: isolate.DefaultCPUs,
		Wall: 30*time.Second + isolate.WallGrace, WorkSize: isolate.DefaultWorkSize, TmpSize: isolate.DefaultTmpSize}
	if o.Limits != want || len(o.Steps) != 8 {
		t.Errorf("expected limits %+v and 8 steps, observed %+v and %d", want, o.Limits, len(o.Steps))
	}
	for _, bad := range []isolate.Options{
		{SubmissionBin: ""},
		{SubmissionBin: "/x", Steps: []int{0}},
		{SubmissionBin: "/x", Steps: []int{9}},
		{SubmissionBin: "/x", Steps: []int{2, 2}},
		{SubmissionBin: "/x", Limits: isolate.Limits{Memory: 1 << 20}},
		{SubmissionBin: "/x", Limits: isolate.Limits{PIDs: 3}},
		{SubmissionBin: "/x", Limits: isolate.Limits{CPUs: -1}},
	} {
		if _, err := isolate.Interpret(bad, "", "", 0, false, false); err == nil {
			t.Errorf("options %+v: expected an error", bad)
		}
	}
}

func TestJUnitIsWellFormed(t *testing.T) {
	f := failedCheck(2)
	f.Checks[1].Observed = "exit 1 (stderr: \x00\x1b[31mbinary\xff junk)"
	o, err := isolate.Interpret(isolate.Options{SubmissionBin: "/x/sub", Steps: []int{1, 2}}, "",
		isolate.Marker+"\n"+labJSON(t, passed(1, 2), f), 1, false, false)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := isolate.WriteJUnit(&b, o); err != nil {
		t.Fatal(err)
	}
	// <testsuites> holding one suite, as labsteps and internal/grade write it.
	var root struct {
		XMLName xml.Name `xml:"testsuites"`
		Suites  []struct {
			Tests     int    `xml:"tests,attr"`
			Failures  int    `xml:"failures,attr"`
			SystemOut string `xml:"system-out"`
		} `xml:"testsuite"`
	}
	err = xml.Unmarshal(b.Bytes(), &root)
	if err != nil || len(root.Suites) != 1 {
		t.Fatalf("junit.xml: expected well-formed <testsuites> with one suite, observed %d suites, %v\n%s", len(root.Suites), err, b.String())
	}
	if s := root.Suites[0]; s.Tests != 2 || s.Failures != 1 || !strings.HasPrefix(s.SystemOut, "1 of 2 lab steps passed") {
		t.Errorf("junit.xml: expected 2 tests, 1 failure, the summary as system-out; observed %+v", s)
	}
}

// ---- staging ----

// tinyStaticELF is an ELF header with no program headers: no dynamic
// loader asked for, which is what the staging checks.
func tinyStaticELF() []byte {
	h := make([]byte, 64)
	copy(h, "\x7fELF\x02\x01\x01")
	binary.LittleEndian.PutUint16(h[16:], 2)    // ET_EXEC
	binary.LittleEndian.PutUint16(h[18:], 0x3e) // x86-64
	binary.LittleEndian.PutUint32(h[20:], 1)    // version
	binary.LittleEndian.PutUint16(h[52:], 64)   // ehsize
	binary.LittleEndian.PutUint16(h[54:], 56)   // phentsize
	binary.LittleEndian.PutUint16(h[58:], 64)   // shentsize
	return h
}

func submission(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "sub")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	for name, kind := range files {
		p := filepath.Join(dir, name)
		var err error
		switch {
		case kind == "elf":
			err = os.WriteFile(p, tinyStaticELF(), 0o700)
		case kind == "script":
			err = os.WriteFile(p, []byte("#!/bin/sh\nexit 0\n"), 0o755)
		case kind == "noexec":
			err = os.WriteFile(p, tinyStaticELF(), 0o644)
		case kind == "fifo":
			err = syscall.Mkfifo(p, 0o755)
		case strings.HasPrefix(kind, "->"):
			err = os.Symlink(strings.TrimPrefix(kind, "->"), p)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestStagingCopiesOnlyThePrograms(t *testing.T) {
	dir := submission(t, map[string]string{"queuectl": "elf", "real-sender": "elf", "sender": "->real-sender", "receiver": "elf", "notes.txt": "elf"})
	parent := t.TempDir()
	root, sub, problem, err := isolate.Stage(parent, dir)
	if err != nil || problem != "" {
		t.Fatalf("expected staged, observed %v, %q", err, problem)
	}
	ents, _ := os.ReadDir(sub)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
		fi, _ := os.Lstat(filepath.Join(sub, e.Name()))
		if fi.Mode() != 0o555 {
			t.Errorf("%s: expected a regular 0555 file, observed %v", e.Name(), fi.Mode())
		}
	}
	if strings.Join(names, " ") != "queuectl receiver sender" {
		t.Errorf("staged: expected the three programs only, observed %v", names)
	}
	if fi, _ := os.Stat(root); fi.Mode().Perm() != 0o700 {
		t.Errorf("staging root: expected 0700 (no other host user enters), observed %v", fi.Mode())
	}
	if fi, _ := os.Stat(sub); fi.Mode().Perm() != 0o755 {
		t.Errorf("staged dir: expected 0755 (the container's user reads it), observed %v", fi.Mode())
	}
}

func TestStagingRefusesWhatCannotRunInScratch(t *testing.T) {
	outside := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(outside, tinyStaticELF(), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		files map[string]string
		want  string
	}{
		{map[string]string{"queuectl": "elf", "sender": "elf"}, "receiver: missing from the submission"},
		{map[string]string{"queuectl": "elf", "sender": "->" + outside, "receiver": "elf"}, "sender: a symlink leading out of the submission's directory"},
		{map[string]string{"queuectl": "script", "sender": "elf", "receiver": "elf"}, "not an ELF executable"},
		{map[string]string{"queuectl": "elf", "sender": "elf", "receiver": "fifo"}, "receiver: not a regular file"},
		{map[string]string{"queuectl": "noexec", "sender": "elf", "receiver": "elf"}, "queuectl is not an executable file"},
	} {
		dir := submission(t, tc.files)
		parent := t.TempDir()
		root, _, problem, err := isolate.Stage(parent, dir)
		if err != nil {
			t.Fatalf("%v: %v", tc.files, err)
		}
		os.RemoveAll(root)
		if !strings.Contains(problem, tc.want) {
			t.Errorf("%v: expected a problem containing %q, observed %q", tc.files, tc.want, problem)
		}
	}
}

// TestStudentTextNamesNoMachinePath: what a program read in
// /proc/self/mountinfo and printed (the staging dir, the engine's layers)
// reaches no student-visible text.
func TestStudentTextNamesNoMachinePath(t *testing.T) {
	leak := "1 0 0:1 / / ro - overlay overlay rw,lowerdir=/var/lib/docker/overlay2/l/ABC:/var/lib/docker/overlay2/l/DEF,upperdir=/var/lib/docker/overlay2/123/diff\n" +
		"2 1 8:1 /tmp/grader/snacklab-isolate-42/sub /sub ro - ext4 /dev/sda1 rw\n"
	stderr := isolate.Marker + "\n" + labJSON(t, passed(1, 3), failedCheck(2))
	o, err := isolate.Interpret(isolate.Options{SubmissionBin: "/x/sub", Steps: []int{1, 2}}, "", stderr, 1, false, false)
	if err != nil {
		t.Fatal(err)
	}
	o.Steps[1].Output += leak
	o.Steps[1].Reason += leak
	o.Problem = leak
	if len(o.Reported) == 0 || len(o.Reported[len(o.Reported)-1].Checks) == 0 {
		t.Fatalf("Interpret: got %d reported steps; want the lab's report kept", len(o.Reported))
	}
	// The lab's full report reaches LabResults as it is: every field of it
	// must be scrubbed too, encoded copies included.
	r := &o.Reported[len(o.Reported)-1]
	r.Narrative = leak
	r.Checks[0].Observed = leak + base64.StdEncoding.EncodeToString([]byte(leak))
	r.Problem = "x/tmp/grader/snacklab-isolate-42/sub/queuectl"
	isolate.Scrub(&o, "/tmp/grader/snacklab-isolate-42", "/x/sub")
	lab, err := json.Marshal(o.LabResults())
	if err != nil {
		t.Fatal(err)
	}
	var gs, ju bytes.Buffer
	if err := isolate.WriteGradescope(&gs, o); err != nil {
		t.Fatal(err)
	}
	if err := isolate.WriteJUnit(&ju, o); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{o.Steps[1].Output, o.Steps[1].Reason, o.Problem, string(lab), gs.String(), ju.String()} {
		for _, bad := range []string{"/var/lib/docker", "/tmp/grader", "snacklab-isolate-42", base64.StdEncoding.EncodeToString([]byte(leak))[:24]} {
			if strings.Contains(s, bad) {
				t.Errorf("got %q; want no %q", s, bad)
			}
		}
	}
	if !strings.Contains(o.Problem, "[grader]/sub /sub ro") {
		t.Errorf("got %q; want the staging path replaced by [grader]", o.Problem)
	}
}
