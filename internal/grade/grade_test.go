package grade_test

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"snacklab/internal/grade"
	"snacklab/internal/tier"
	"snacklab/labsteps/harness"
	"snacklab/labsteps/report"
)

// refBin holds the reference's three executables, built once; labBin is
// the lab, the step worker of every grading test.
var refBin, labBin string

func TestMain(m *testing.M) {
	// The grader runs every step in a worker process: this test binary.
	if len(os.Args) > 1 && os.Args[1] == grade.WorkerArg {
		os.Exit(grade.WorkerMain(os.Args[2:], os.Stderr))
	}
	os.Exit(func() int {
		dir, err := os.MkdirTemp("", "snacklab-grade-test-*")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		gomod, err := exec.Command("go", "env", "GOMOD").Output()
		if err != nil {
			fmt.Fprintln(os.Stderr, "go env GOMOD:", err)
			return 1
		}
		refBin = filepath.Join(dir, "bin")
		// The workers are a lab built without the race detector: the test
		// binary itself, instrumented, made every step several times
		// slower, and 32 of them at once on 2 shared cores ran the
		// reference into its 12 s step limits (it scored 50 and 87.5).
		labBin = filepath.Join(dir, "lab", "lab")
		// -tags nomutants: the lab lab grade puts into its containers
		// must not carry the reference's lines (isolate.ErrCarriesMutants).
		cmd := exec.Command("go", append([]string{"build", "-tags", "nomutants", "-o", refBin + "/"}, append(grade.Programs, "./cmd/lab")...)...)
		cmd.Dir = filepath.Dir(strings.TrimSpace(string(gomod)))
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "build the reference: %v\n%s", err, out)
			return 1
		}
		os.Mkdir(filepath.Dir(labBin), 0o755)
		if err := os.Rename(filepath.Join(refBin, "lab"), labBin); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		return m.Run()
	}())
}

func config(t *testing.T, out string) grade.Config {
	return grade.Config{Out: out, Worker: []string{labBin, "grade"}, Jobs: 2, StepTimeout: 90 * time.Second, Lab: "lab"}
}

// binDir makes a bin dir: each program is a shell script when given, else
// a link to the reference's.
func binDir(t *testing.T, parent, name string, scripts map[string]string) string {
	t.Helper()
	d := filepath.Join(parent, name)
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"queuectl", "sender", "receiver"} {
		var err error
		if s, ok := scripts[p]; ok {
			err = os.WriteFile(filepath.Join(d, p), []byte("#!/bin/sh\n"+s+"\n"), 0o755)
		} else {
			err = os.Symlink(filepath.Join(refBin, p), filepath.Join(d, p))
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return d
}

func writeFiles(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for name, body := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// why lists a record's failed steps with their reasons: a test that sees a
// submission lose points says which checks it lost them on.
func why(r grade.Record) string {
	var b strings.Builder
	if r.Problem != "" {
		fmt.Fprintf(&b, "  not graded: %s\n", r.Problem)
	}
	for _, s := range r.Steps {
		if s.Status() != "passed" {
			fmt.Fprintf(&b, "  step %d %s %s: %s\n", s.Num, s.Slug, s.Status(), s.Reason)
		}
	}
	return b.String()
}

func byName(t *testing.T, recs []grade.Record) map[string]grade.Record {
	m := map[string]grade.Record{}
	for _, r := range recs {
		m[r.Name] = r
	}
	return m
}

// A unique argument lets the test find the hostile processes afterwards.
var sleepArg = strconv.Itoa(900000 + os.Getpid()%99999)

// livingSleepers lists processes still running `sleep sleepArg`.
func livingSleepers() []string {
	ents, _ := os.ReadDir("/proc")
	var out []string
	for _, e := range ents {
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil {
			continue
		}
		stat, _ := os.ReadFile("/proc/" + e.Name() + "/stat")
		if bytes.Contains(b, []byte("sleep\x00"+sleepArg)) && !bytes.Contains(stat, []byte(") Z ")) {
			out = append(out, e.Name()+": "+strings.ReplaceAll(string(b), "\x00", " "))
		}
	}
	return out
}

// The cohort: the reference, a module that does not compile, hostile bin
// dirs, and paths that are not submissions. Every submission gets its own
// score, the hostile ones cost only their own steps, and nothing they
// started survives the grading.
func TestGradeCohort(t *testing.T) {
	tier.Slow(t)
	t.Parallel()
	root := t.TempDir()
	out := filepath.Join(root, "out")
	ref := binDir(t, root, "ref", nil)
	sleeper := binDir(t, root, "sleeper", map[string]string{"sender": "sleep " + sleepArg})
	hostile := binDir(t, filepath.Join(root, "x"), "hostile", map[string]string{
		"sender":   "sleep " + sleepArg,
		"receiver": "exit 0",
		"queuectl": `head -c 2000 /dev/urandom; printf '{"garbage": \377\000 }\n'`,
	})
	printer := binDir(t, root, "printer", map[string]string{"queuectl": "exec yes lab-grade-test-garbage"})
	escaper := ""
	if _, err := exec.LookPath("setsid"); err == nil {
		escaper = binDir(t, root, "escaper", map[string]string{"sender": "setsid sleep " + sleepArg})
	}
	broken := filepath.Join(root, "broken")
	writeFiles(t, broken, map[string]string{
		"go.mod":               "module broken\n\ngo 1.26\n",
		"cmd/queuectl/main.go": "package main\n\nfunc main() { this is not Go }\n",
		"cmd/sender/main.go":   "package main\n\nfunc main() {}\n",
		"cmd/receiver/main.go": "package main\n\nfunc main() {}\n",
	})
	notSub := filepath.Join(root, "empty")
	os.Mkdir(notSub, 0o755)
	missing := filepath.Join(root, "missing")
	dup := binDir(t, filepath.Join(root, "y"), "hostile", map[string]string{"receiver": "exit 3"})

	cfg := config(t, out)
	// A fixed step limit: the waits inside are still derived from the
	// machine, but the hanging programs here would otherwise hold each of
	// their steps for the derived limit (up to 10 min on a loaded CI
	// machine). On a machine loaded past it, a step is not judged (never
	// failed): the reference is then "not graded", and never below 100.
	// TestHostileCohort grades with the default, derived limits.
	cfg.StepTimeout = 2 * time.Minute
	cfg.Jobs = 3
	cfg.MemLimit = 256 << 20
	var log bytes.Buffer
	cfg.Log = &log
	paths := []string{ref, sleeper, hostile, printer, broken, notSub, missing, dup}
	if escaper != "" {
		paths = append(paths, escaper)
	}
	rep, err := grade.Grade(context.Background(), cfg, paths)
	if err != nil {
		t.Fatal(err)
	}
	// Every step is stopped by its limit (+ 16 s to kill what is left):
	// the sleepers sleep for days, so a step that was never stopped shows
	// here. Judged per step, not on the whole grading, whose time is the
	// machine's load (builds included), not the grader's doing.
	for _, r := range rep.Graded {
		for _, s := range r.Steps {
			if limit := 2 * (cfg.StepTimeout + 16*time.Second); s.Took > limit.Seconds() {
				t.Errorf("%s step %d took %.0fs; a step is stopped by %v", r.Name, s.Num, s.Took, cfg.StepTimeout+16*time.Second)
			}
		}
	}
	recs := byName(t, rep.Graded)
	if len(recs) != len(paths) {
		t.Fatalf("graded %d submissions, want %d:\n%s", len(recs), len(paths), log.String())
	}
	var invalid []string
	for _, s := range rep.Invalid {
		invalid = append(invalid, s.Name)
	}
	slices.Sort(invalid)
	if want := []string{"empty", "missing"}; !slices.Equal(invalid, want) {
		t.Errorf("invalid submissions %v, want %v", invalid, want)
	}

	allSteps := "12345678"
	for _, tc := range []struct {
		name   string
		passed string // the steps that must pass
		score  float64
		detail []string // in the results.json of the submission
		// hangs: some program of it never ends, so a wait runs out: the
		// submission is not graded (not judged, never failed).
		hangs bool
	}{
		{"ref", allSteps, 100, []string{"8 of 8 lab steps passed"}, false},
		// The waits are derived from a calibration and the load, so the
		// message names a limit that depends on the machine: match its words.
		// Step 1e asks every program for its help: a sleeping sender fails it.
		{"sleeper", "345", 37.5, []string{"S exits", "still running after"}, true},
		{"hostile-1", "", 0, []string{"prints one JSON object", "listening on"}, true},
		// Its receiver exits at once; step 7 needs none (the lab's own
		// holding server answers the race), so it passes there too.
		// Its receiver's help exits 3: step 1e fails.
		{"hostile-2", "3457", 50, []string{"listening on"}, false},
		// Stopped by the harness's memory bound, by the step's cgroup
		// limit (the kernel's kill), or, on a machine too busy to fill
		// either in time, by a wait or the step's hard limit: it says why.
		{"printer", "", 0, []string{"printed without end|printed or allocated without end|timed out|after its time limit"}, false},
		{"broken", "", 0, []string{"the build failed", "syntax error"}, false},
		{"empty", "", 0, []string{"is neither a Go module"}, false},
		{"missing", "", 0, []string{"does not exist"}, false},
		{"escaper", "345", 37.5, []string{"Grader: run 1: ", "the grader killed", "sleep (pid "}, true}, // at the end of the step or at its time limit: the setsid child is in its cgroup
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.name == "escaper" && escaper == "" {
				t.Skip("no setsid on this machine")
			}
			r, ok := recs[tc.name]
			if !ok {
				t.Fatalf("no record; have %v", rep.Graded)
			}
			var passed, unjudged string
			for _, s := range r.Steps {
				switch s.Status() {
				case "passed":
					passed += strconv.Itoa(s.Num)
				case "not judged":
					unjudged += strconv.Itoa(s.Num)
				}
			}
			b, err := os.ReadFile(filepath.Join(out, tc.name, "results.json"))
			if err != nil {
				t.Fatal(err)
			}
			if tc.hangs && r.NotGraded == "" {
				t.Errorf("graded %v; want not graded: a program of it never ends, so some wait ran out, and that is not a wrong answer", r.Score)
			}
			if r.NotGraded != "" {
				// Not graded: only waits that ran out (never ERROR), every
				// step it must pass passed or was not judged, and no score
				// anywhere in results.json.
				t.Logf("not graded on this machine (load %.1f per core): %s", harness.LoadPerCore(), r.NotGraded)
				if strings.Contains(r.NotGraded, "(ERROR)") || strings.Contains(r.NotGraded, "(INTERRUPTED)") {
					t.Errorf("not graded %q; want only TIMEOUTs: nothing erred or was interrupted", r.NotGraded)
				}
				for _, n := range tc.passed {
					if !strings.ContainsRune(passed+unjudged, n) {
						t.Errorf("step %c neither passed nor was left unjudged; the failures:\n%s", n, why(r))
					}
				}
				if bytes.Contains(b, []byte(`"score"`)) || !bytes.Contains(b, []byte("NOT GRADED")) {
					t.Errorf("results.json of a submission not graded: want no score and NOT GRADED:\n%s", clipText(string(b)))
				}
				return
			}
			// tc.score is the points of the steps that passed whole; parts
			// of the others may add to it (never a whole step's worth).
			lost := 12.5 * float64(8-len(tc.passed))
			partial := r.Score >= tc.score && (r.Score < tc.score+lost || lost == 0)
			if r.Problem != "" {
				partial = r.Score == 0 // not graded: nothing ran
			}
			if passed != tc.passed || !partial || r.Max != 100 {
				t.Errorf("passed steps %q, score %v/%v; want %q, %v/100; the failures:\n%s", passed, r.Score, r.Max, tc.passed, tc.score, why(r))
			}
			if !utf8.Valid(b) || !json.Valid(b) {
				t.Fatalf("results.json is not valid UTF-8 JSON")
			}
			var gs struct {
				Score float64 `json:"score"`
				Tests []struct {
					Number   string  `json:"number"`
					Score    float64 `json:"score"`
					MaxScore float64 `json:"max_score"`
					Status   string  `json:"status"`
				} `json:"tests"`
			}
			if err := json.Unmarshal(b, &gs); err != nil {
				t.Fatal(err)
			}
			// One test per part (per step when a step ran none), each
			// step's tests worth its 12.5 points.
			perStep := map[string]float64{}
			for _, x := range gs.Tests {
				n, _, _ := strings.Cut(x.Number, ".")
				perStep[n] += x.MaxScore
			}
			if gs.Score != r.Score || len(perStep) != 8 || math.Abs(perStep["1"]-12.5) > 1e-9 {
				t.Errorf("results.json: score %v, steps %v; want %v, 8 of 12.5", gs.Score, perStep, r.Score)
			}
			for _, want := range tc.detail {
				text := strings.ReplaceAll(string(b), `\"`, `"`)
				if !slices.ContainsFunc(strings.Split(want, "|"), func(w string) bool { return strings.Contains(text, w) }) {
					t.Errorf("results.json lacks %q:\n%s", want, clipText(text))
				}
			}
			x, err := os.ReadFile(filepath.Join(out, tc.name, "junit.xml"))
			if err != nil {
				t.Fatal(err)
			}
			var suites struct {
				Suite struct {
					Name     string `xml:"name,attr"`
					Failures int    `xml:"failures,attr"`
				} `xml:"testsuite"`
			}
			if err := xml.Unmarshal(x, &suites); err != nil {
				t.Fatalf("junit.xml: %v", err)
			}
			if suites.Suite.Name != tc.name || (suites.Suite.Failures == 0) != (tc.score == 100) {
				t.Errorf("junit.xml: suite %q with %d failures", suites.Suite.Name, suites.Suite.Failures)
			}
		})
	}
	// The failing steps' work dirs are kept, with replay lines.
	s2 := recs["sleeper"].Steps[1]
	if len(s2.Kept) != 1 || s2.Replay != "lab run --bin "+sleeper+" 2" {
		t.Errorf("sleeper step 2: kept %v, replay %q", s2.Kept, s2.Replay)
	} else if _, err := os.Stat(filepath.Join(s2.Kept[0], "lab.log")); err != nil {
		t.Errorf("kept work dir: %v", err)
	}
	if _, err := os.Stat(filepath.Join(out, "ref", "logs")); !os.IsNotExist(err) {
		t.Errorf("a submission that passed everything keeps a logs dir (%v)", err)
	}
	if left := livingSleepers(); len(left) > 0 {
		t.Errorf("processes a submission started are still running:\n%s", strings.Join(left, "\n"))
	}
	// The cohort reports.
	f, err := os.Open(filepath.Join(out, "grades.csv"))
	if err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(f).ReadAll()
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != len(paths)+1 || rows[0][0] != "submission" || rows[0][9] != "total" {
		t.Fatalf("grades.csv: %d rows, header %v", len(rows), rows[0])
	}
	status := map[string]string{}
	for _, row := range rows[1:] {
		status[row[0]] = row[12]
		ungraded := recs[row[0]].NotGraded != ""
		if ungraded && (row[9] != "" || row[11] != "" || row[12] != "not graded" || row[1] != "") {
			t.Errorf("grades.csv row %v of a submission not graded: want no points, no total, no percent, status not graded", row)
		}
		if row[0] == "ref" && (row[9] != "100" || row[1] != "12.5") && !(ungraded && row[9] == "" && row[12] == "not graded") {
			t.Errorf("grades.csv row %v: want 100 (or not graded, with no points)", row)
		}
	}
	if status["ref"] != "graded" && recs["ref"].NotGraded == "" || status["broken"] != "build failed" || status["missing"] != "not graded" {
		t.Errorf("grades.csv statuses %v", status)
	}
	for _, name := range []string{"grades.md", "grades.html"} {
		b, err := os.ReadFile(filepath.Join(out, name))
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"hostile-1", "broken", "does not exist"} {
			if !bytes.Contains(b, []byte(want)) {
				t.Errorf("%s lacks %q", name, want)
			}
		}
	}
}

// A step that passes in one run and fails in another is flaky: it scores 0,
// and the report says how to replay the failing run and where it is kept.
func TestRepeatMarksFlaky(t *testing.T) {
	tier.Slow(t)
	t.Parallel()
	root := t.TempDir()
	// Fails step 1's part a in the second run only: the run's work dirs are
	// under run-2, and part a alone asks backoff for --json (the generated
	// part f tries backoff's flags without it).
	sub := binDir(t, root, "flaky", map[string]string{"queuectl": `case "$PWD" in */run-2/*) [ "$1 $2" = "backoff --json" ] && exit 1;; esac
exec ` + filepath.Join(refBin, "queuectl") + ` "$@"`})
	cfg := config(t, filepath.Join(root, "out"))
	cfg.Runs = 2
	cfg.Points = grade.Points{1: 40, 3: 60}
	var log bytes.Buffer
	cfg.Log = &log
	rep, err := grade.Grade(context.Background(), cfg, []string{sub})
	if err != nil {
		t.Fatal(err)
	}
	r := rep.Graded[0]
	// Step 1's part a (backoff) is flaky and scores 0; its other parts
	// passed both runs and keep their share of the step's 40 points (split
	// among the parts that weigh: report.DefaultWeights).
	parts := len(r.Steps[0].Parts)
	weighted := float64(parts)
	for _, p := range r.Steps[0].Parts {
		if w, ok := report.DefaultWeights()[report.Key(1, p.ID)]; ok {
			weighted += w - 1
		}
	}
	want := 60 + 40*(weighted-1)/weighted
	if parts < 2 || math.Abs(r.Score-want) > 0.01 || r.Max != 100 || len(r.Steps) != 2 {
		t.Fatalf("score %v/%v over %d steps (%d parts in step 1), want %.3f/100 over 2\n%s%s", r.Score, r.Max, len(r.Steps), parts, want, log.String(), why(r))
	}
	s1, s3 := r.Steps[0], r.Steps[1]
	if !s1.Flaky || s1.Status() != "flaky" || s1.Passes != 1 || s1.Runs != 2 ||
		s1.Parts[0].Status() != "flaky" || s1.Parts[0].Score != 0 || s1.Parts[1].Status() != "passed" {
		t.Errorf("step 1: %+v", s1)
	}
	if s3.Status() != "passed" || s3.Passes != 2 {
		t.Errorf("step 3: %+v", s3)
	}
	wantReplay := "lab run --bin " + sub + " 1"
	if s1.Replay != wantReplay || len(s1.Kept) != 1 || !strings.Contains(s1.Kept[0], string(filepath.Separator)+"run-2"+string(filepath.Separator)) {
		t.Errorf("step 1 replay %q, kept %v; want %q and run 2's work dir", s1.Replay, s1.Kept, wantReplay)
	}
	if !strings.Contains(log.String(), "flaky: step 1 retry passed 1 of 2 runs; replay: "+wantReplay) {
		t.Errorf("the log does not say how to replay:\n%s", log.String())
	}
}

// Shards graded apart and merged give the same cohort report as one run;
// missing, overlapping and foreign shards are refused.
func TestShardAndMerge(t *testing.T) {
	tier.Slow(t)
	t.Parallel()
	root := t.TempDir()
	var paths []string
	for _, n := range []string{"ann", "bob", "cy", "dee", "eve"} {
		paths = append(paths, binDir(t, root, n, nil))
	}
	paths = append(paths, filepath.Join(root, "gone"))
	try := func(dir string, shard grade.Shard, paths []string) error {
		cfg := config(t, filepath.Join(root, dir))
		cfg.Points = grade.Points{1: 100}
		cfg.Shard = shard
		_, err := grade.Grade(context.Background(), cfg, paths)
		return err
	}
	gradeTo := func(dir string, shard grade.Shard, paths []string) {
		t.Helper()
		if err := try(dir, shard, paths); err != nil {
			t.Fatal(err)
		}
	}
	gradeTo("whole", grade.Shard{}, paths)
	for i := range 3 {
		gradeTo(fmt.Sprintf("s%d", i), grade.Shard{I: i, N: 3}, paths)
	}
	gradeTo("other", grade.Shard{I: 1, N: 3}, paths[:5])
	dir := func(names ...string) []string {
		var out []string
		for _, n := range names {
			out = append(out, filepath.Join(root, n))
		}
		return out
	}
	rep, err := grade.Merge(filepath.Join(root, "merged"), dir("s2", "s0", "s1"))
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Records) != 6 || rep.Shards != 3 {
		t.Errorf("merged %d records of %d shards", len(rep.Records), rep.Shards)
	}
	for _, f := range []string{"grades.csv", "grades.md", "grades.html"} {
		a, _ := os.ReadFile(filepath.Join(root, "whole", f))
		b, _ := os.ReadFile(filepath.Join(root, "merged", f))
		if len(a) == 0 || !bytes.Equal(a, b) {
			t.Errorf("%s of the merge differs from the one of a single run:\n%s\n---\n%s", f, a, b)
		}
	}
	if _, err := os.Stat(filepath.Join(root, "merged", "eve", "results.json")); err != nil {
		t.Error(err)
	}
	for _, tc := range []struct {
		name   string
		shards []string
		want   string
	}{
		{"missing", dir("s0", "s2"), "missing shards: 1/3"},
		{"overlapping", dir("s0", "s1", "s1", "s2"), "overlapping shards"},
		{"other cohort", dir("s0", "other", "s2"), "graded different cohorts"},
		{"not a shard", dir("ann"), "is not the output of lab grade"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := grade.Merge(filepath.Join(root, "merged-"+strings.ReplaceAll(tc.name, " ", "-")), tc.shards)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("merge %v: %v; want an error saying %q", tc.shards, err, tc.want)
			}
		})
	}
	if err := try("s0", grade.Shard{I: 2, N: 3}, paths); err == nil || !strings.Contains(err.Error(), "holds shard 0/3") {
		t.Errorf("shard 2/3 into shard 0/3's --out: %v", err)
	}
	if _, err := grade.Merge(filepath.Join(root, "s0"), dir("s0", "s1", "s2")); err == nil || !strings.Contains(err.Error(), "one of the shard directories") {
		t.Errorf("merge into a shard: %v", err)
	}
}

func TestDiscover(t *testing.T) {
	root := t.TempDir()
	writeFiles(t, root, map[string]string{
		"a/sub/go.mod":       "module x\n",
		"b/sub/queuectl":     "",
		"c/Sub/go.mod":       "module x\n",
		"weird name!/go.mod": "module x\n",
		"grades.csv/go.mod":  "module x\n",
		"file":               "",
		"sub-1/go.mod":       "module x\n",
	})
	os.Mkdir(filepath.Join(root, "empty"), 0o755)
	p := func(s string) string { return filepath.Join(root, s) }
	subs := grade.Discover([]string{p("b/sub"), p("a/sub/"), p("c/Sub"), p("weird name!"), p("grades.csv"), p("file"), p("empty"), p("nope"), p("sub-1")})
	type got struct {
		name, path string
		kind       grade.Kind
	}
	var have []got
	for _, s := range subs {
		have = append(have, got{s.Name, strings.TrimPrefix(s.Path, root+"/"), s.Kind})
	}
	want := []got{
		{"Sub", "c/Sub", grade.KindModule},
		{"empty", "empty", grade.KindInvalid},
		{"file", "file", grade.KindInvalid},
		{"grades.csv-1", "grades.csv", grade.KindModule},
		{"nope", "nope", grade.KindInvalid},
		{"sub-1", "sub-1", grade.KindModule},
		{"sub-2", "a/sub", grade.KindModule},
		{"sub-3", "b/sub", grade.KindBin},
		{"weird_name_", "weird name!", grade.KindModule},
	}
	if !slices.Equal(have, want) {
		t.Errorf("Discover:\n got %v\nwant %v", have, want)
	}
}

func TestParsePoints(t *testing.T) {
	file := filepath.Join(t.TempDir(), "points")
	writeFiles(t, filepath.Dir(file), map[string]string{"points": "# the crash story counts most\n1=10, 2=10\nrace=20 crash=60\n"})
	for _, tc := range []struct {
		spec string
		want string // Points.String(), or the error's text
	}{
		{"1=10,2=10,3=10,4=10,5=10,6=10,7=10,8=30", "1=10,2=10,3=10,4=10,5=10,6=10,7=10,8=30"},
		{"8=50,retry=50", "1=50,8=50"},
		{"3=0.5,4=0", "3=0.5,4=0"},
		{file, "1=10,2=10,7=20,8=60"},
		{"9=10", "want STEP=POINTS with STEP 1–8"},
		{"nap=10", "want STEP=POINTS with STEP 1–8"},
		{"1=-1", "points must be a number >= 0"},
		{"1=NaN", "points must be a number >= 0"},
		{"1=1,1=2", "step 1 given twice"},
		{"1=0", "no points given"},
		{filepath.Join(t.TempDir(), "absent"), "no such file"},
	} {
		t.Run(tc.spec, func(t *testing.T) {
			p, err := grade.ParsePoints(tc.spec)
			got := ""
			if err != nil {
				got = err.Error()
			} else {
				got = p.String()
			}
			if !strings.Contains(got, tc.want) {
				t.Errorf("ParsePoints(%q) = %q, want %q", tc.spec, got, tc.want)
			}
		})
	}
	if d := grade.DefaultPoints(); d.Max() != 100 || len(d.Steps()) != 8 || d[8] != 12.5 {
		t.Errorf("default points %v", d)
	}
}

// Every shard of every size takes a disjoint, balanced slice, and together
// they are the cohort.
func TestShardTake(t *testing.T) {
	for size := range 12 {
		var cohort []grade.Submission
		for i := range size {
			cohort = append(cohort, grade.Submission{Name: fmt.Sprintf("s%02d", i)})
		}
		for n := 1; n <= 5; n++ {
			seen := map[string]int{}
			lo, hi := size, 0
			for i := range n {
				part := grade.Shard{I: i, N: n}.Take(cohort)
				lo, hi = min(lo, len(part)), max(hi, len(part))
				for _, s := range part {
					seen[s.Name]++
				}
			}
			if len(seen) != size || hi-lo > 1 {
				t.Errorf("%d submissions in %d shards: %d distinct taken, slices of %d to %d", size, n, len(seen), lo, hi)
			}
			for name, k := range seen {
				if k != 1 {
					t.Errorf("%s taken %d times", name, k)
				}
			}
		}
	}
	for _, tc := range []struct {
		in string
		ok bool
	}{{"0/1", true}, {"3/4", true}, {"4/4", false}, {"-1/4", false}, {"1/0", false}, {"1", false}, {"a/b", false}} {
		if _, err := grade.ParseShard(tc.in); (err == nil) != tc.ok {
			t.Errorf("ParseShard(%q): %v", tc.in, err)
		}
	}
}

// An output directory whose result dirs would replace a submission is refused.
func TestOutMustNotHoldSubmissions(t *testing.T) {
	root := t.TempDir()
	sub := binDir(t, root, "alice", nil)
	_, err := grade.Grade(context.Background(), config(t, root), []string{sub})
	if err == nil || !strings.Contains(err.Error(), "holds the submission") {
		t.Errorf("grading into the submission's parent: %v", err)
	}
	if _, err := os.Stat(filepath.Join(sub, "queuectl")); err != nil {
		t.Errorf("the submission was touched: %v", err)
	}
}

// What the grader's own machinery does when it fails: a build past the
// grader's time limit and a step worker that dies leave the submission not
// graded (no score, the reason), never a 0; a step whose processes take
// its memory is judged, and fails; the run goes on.
func TestGraderFaults(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	module := filepath.Join(root, "slow")
	writeFiles(t, module, map[string]string{
		"go.mod":               "module slow\n\ngo 1.26\n",
		"cmd/queuectl/main.go": "package main\n\nfunc main() {}\n",
		"cmd/sender/main.go":   "package main\n\nfunc main() {}\n",
		"cmd/receiver/main.go": "package main\n\nfunc main() {}\n",
	})
	for _, tc := range []struct {
		name      string
		sub       string
		tweak     func(*grade.Config)
		want      string
		notGraded string
	}{
		{"build time limit", module, func(c *grade.Config) { c.BuildTimeout = time.Millisecond }, "go build did not finish within 1ms", "the grader's limit"},
		{"worker dies", binDir(t, root, "ok", nil), func(c *grade.Config) { c.Worker = []string{"/bin/sh", "-c", "echo worker fell over >&2; exit 7", "sh"} },
			"the grader's step worker ended without a result (exit status 7): worker fell over", "step 1 (ERROR)"},
		// A worker that joins its step's cgroup (as the real one does) and
		// then holds 300 MB: the kernel kills it at the 64 MiB limit.
		{"step memory limit", binDir(t, root, "ok2", nil), func(c *grade.Config) {
			c.StepMemory = 64 << 20
			c.Worker = []string{"/bin/sh", "-c", `for a; do [ "$prev" = -cgroup ] && for f in $(echo "$a" | tr , ' '); do echo $$ > "$f"; done; prev=$a; done
x=$(head -c 300000000 /dev/zero | tr '\0' a); echo survived >&2; exit 7`, "sh"}
		}, "reached the step's memory limit of 64 MiB and the kernel killed them", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.name == "step memory limit" && os.Geteuid() != 0 {
				t.Skip("the step's cgroup needs root")
			}
			cfg := config(t, filepath.Join(root, "out-"+strings.ReplaceAll(tc.name, " ", "-")))
			cfg.Points = grade.Points{1: 100}
			tc.tweak(&cfg)
			rep, err := grade.Grade(context.Background(), cfg, []string{tc.sub})
			if err != nil {
				t.Fatal(err)
			}
			r := rep.Graded[0]
			got := r.Problem + r.NotGraded + r.Steps[0].Reason
			if r.Score != 0 || !strings.Contains(got, tc.want) {
				t.Errorf("score %v, reason %q; want 0 and %q", r.Score, got, tc.want)
			}
			switch {
			case tc.notGraded == "" && r.NotGraded != "":
				t.Errorf("not graded %q; want a grade: the submission's own processes did it", r.NotGraded)
			case !strings.Contains(r.NotGraded, tc.notGraded):
				t.Errorf("not graded %q; want it to say %q: the grader's trouble is never a grade", r.NotGraded, tc.notGraded)
			}
		})
	}
}
