package labsteps_test

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"snacklab/internal/tier"
	"snacklab/labsteps"
	"snacklab/labsteps/harness"
	"snacklab/labsteps/mutants"
	"snacklab/labsteps/report"
	"snacklab/labsteps/result"
)

// refBin holds the reference's executables, built once for the whole package.
var refBin string

func TestMain(m *testing.M) {
	os.Exit(func() int {
		dir, err := os.MkdirTemp("", "snacklab-labsteps-test-*")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		root, err := mutants.ModuleRoot(".")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		refBin = filepath.Join(dir, "bin")
		cmd := exec.Command("go", append([]string{"build", "-o", refBin + "/"}, mutants.Programs...)...)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "build the reference: %v\n%s", err, out)
			return 1
		}
		mutantDir = filepath.Join(dir, "mutants")
		return m.Run()
	}())
}

func cfg(t testing.TB, bin string) labsteps.Config {
	return labsteps.Config{Bin: bin, WorkRoot: t.TempDir(), StepTimeout: time.Minute}
}

func TestSelect(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string // step numbers, or "error"
	}{
		{nil, "1 2 3 4 5 6 7 8"},
		{[]string{"8"}, "8"},
		{[]string{"3-5"}, "3 4 5"},
		{[]string{"1,4"}, "1 4"},
		{[]string{"7", "2"}, "2 7"},
		{[]string{"2-2", "1,8"}, "1 2 8"},
		{[]string{"0"}, "error"},
		{[]string{"9"}, "error"},
		{[]string{"5-3"}, "error"},
		{[]string{"x"}, "error"},
		{[]string{"1-"}, "error"},
	} {
		steps, err := labsteps.Select(tc.args)
		got := "error"
		if err == nil {
			var nums []string
			for _, s := range steps {
				nums = append(nums, fmt.Sprint(s.Num))
			}
			got = strings.Join(nums, " ")
		}
		if got != tc.want {
			t.Errorf("Select(%q) = %s, want %s (err %v)", tc.args, got, tc.want, err)
		}
	}
}

// The lab's own FNV-1a is checked against the standard library, and its
// backoff against the contract's bounds.
func TestBackoffFormula(t *testing.T) {
	for _, tc := range []struct {
		id      string
		attempt int
	}{{"o-1", 1}, {"o-1", 2}, {"o-1", 7}, {"snack:order-9", 1000}, {"x", 3}} {
		key := fmt.Sprintf("%s:%d", tc.id, tc.attempt)
		h := fnv.New64a()
		h.Write([]byte(key))
		if got, want := labsteps.FNV1a64(key), h.Sum64(); got != want {
			t.Errorf("fnv1a64(%q) = %d, want %d", key, got, want)
		}
		d := labsteps.BackoffCeiling(tc.attempt)
		want := d/2 + int64(h.Sum64()%uint64(d/2+1))
		if got := labsteps.ExpectedBackoff(tc.id, tc.attempt); got != want || got < d/2 || got > d || d > 60000 {
			t.Errorf("backoff(%s, %d) = %d, want %d within [%d, %d]", tc.id, tc.attempt, got, want, d/2, d)
		}
	}
}

var (
	refOnce    sync.Once
	refResults []result.Result
)

// reference runs all eight steps against the reference once per test binary.
func reference(t *testing.T) []result.Result {
	refOnce.Do(func() {
		c := labsteps.Config{Bin: refBin, StepTimeout: time.Minute}
		refResults = labsteps.RunSteps(context.Background(), c, labsteps.Steps(), nil)
	})
	return refResults
}

func TestReferencePassesEveryStep(t *testing.T) {
	for _, r := range reference(t) {
		t.Run(r.Step.Name(), func(t *testing.T) {
			if !r.Pass {
				t.Fatalf("step %d failed against the reference:\n%s\n%s", r.Step.Num, r.Detail(), r.Narrative)
			}
			if len(r.Checks) < 5 {
				t.Errorf("step %d made %d checks; a step that checks little proves little", r.Step.Num, len(r.Checks))
			}
		})
	}
}

var (
	mutantDir  string
	mutantMu   sync.Mutex
	mutantBins = map[string]string{}
)

// mutantBin builds a mutant once per test binary.
func mutantBin(t *testing.T, m mutants.Mutant) string {
	mutantMu.Lock()
	defer mutantMu.Unlock()
	if bin, ok := mutantBins[m.Name]; ok {
		return bin
	}
	root, err := mutants.ModuleRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	bin, err := m.Build(context.Background(), root, filepath.Join(mutantDir, m.Name))
	if err != nil {
		t.Fatal(err)
	}
	mutantBins[m.Name] = bin
	return bin
}

func mutant(t *testing.T, name string) mutants.Mutant {
	all, err := mutants.All()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range all {
		if m.Name == name {
			return m
		}
	}
	t.Fatalf("no mutant %q", name)
	return mutants.Mutant{}
}

// Every wrong answer still applies to the reference, names steps that exist
// and that the reference passes. Building and grading them all is `lab
// selftest`'s job (CI runs it after the lab): 22 builds would double this
// package's test time, and selftest does it once for everything.
func TestMutantsApply(t *testing.T) {
	tier.Slow(t)
	all, err := mutants.All()
	if errors.Is(err, mutants.ErrNoMutants) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	if len(all) < 12 {
		t.Fatalf("%d mutants, want at least 12", len(all))
	}
	root, err := mutants.ModuleRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	ref := reference(t)
	for _, m := range all {
		t.Run(m.Name, func(t *testing.T) {
			t.Parallel()
			for _, s := range m.Steps {
				if s < 1 || s > len(ref) {
					t.Fatalf("step %d does not exist", s)
				}
				if !ref[s-1].Pass {
					t.Errorf("the reference fails step %d too, so rejecting %s there proves nothing", s, m.Name)
				}
			}
			if err := m.Apply(context.Background(), root, t.TempDir()); err != nil {
				t.Fatal(err)
			}
		})
	}
	// The variants (correct answers every step must pass) apply too.
	variants, err := mutants.Variants()
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range variants {
		t.Run(v.Name, func(t *testing.T) {
			t.Parallel()
			if err := v.Apply(context.Background(), root, t.TempDir()); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// raceRuns is how many times the forced-race tests run their step against
// each binary: 10 (4 with -short), SNACKLAB_RACE_RUNS=100 for the long
// form. Ten runs, four at once, are what CI can afford beside the other
// packages (the race detector makes each step's checks several times
// slower); the selftest rejects each mutant at its step once more.
func raceRuns() int {
	if n, err := strconv.Atoi(os.Getenv("SNACKLAB_RACE_RUNS")); err == nil && n > 0 {
		return n
	}
	if testing.Short() {
		return 4
	}
	return 10
}

// The forced interleaving catches every race-shaped claim every time, and
// never fails the reference: raceRuns runs of step 7 each, four at once so
// the machine is busy, which is when luck would show.
func TestRaceIsForcedNotLucky(t *testing.T) {
	tier.Slow(t)
	runs := raceRuns()
	step7, err := labsteps.Select([]string{"7"})
	if err != nil {
		t.Fatal(err)
	}
	race := func(name string) func() string {
		return func() string { return mutantBin(t, mutant(t, name)) }
	}
	for _, tc := range []struct {
		name     string
		bin      func() string
		wantPass bool
	}{
		{"reference", func() string { return refBin }, true},
		// Every race-shaped claim: each loses only when the two claims
		// overlap, which step 7 must force every time.
		{"check-then-act", race("check-then-act"), false},
		{"claim-cas-on-state", race("claim-cas-on-state"), false},
		{"claim-token-from-read", race("claim-token-from-read"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.name != "reference" && !mutants.Available() {
				t.Skip(mutants.ErrNoMutants)
			}
			bin := tc.bin()
			c := cfg(t, bin)
			c.Parallel = 4
			steps := make([]labsteps.Step, runs)
			for i := range steps {
				steps[i] = step7[0]
			}
			wrong := 0
			for _, r := range labsteps.RunSteps(context.Background(), c, steps, nil) {
				if r.Pass != tc.wantPass {
					wrong++
					if wrong == 1 {
						t.Errorf("step 7 pass=%v, want %v:\n%s", r.Pass, tc.wantPass, r.Detail())
					}
				}
			}
			t.Logf("step 7 against %s: %d/%d runs as expected", tc.name, runs-wrong, runs)
			if wrong > 0 {
				t.Fatalf("%d of %d runs of step 7 against %s went the wrong way", wrong, runs, tc.name)
			}
		})
	}
}

func TestReports(t *testing.T) {
	results := reference(t)
	var buf bytes.Buffer
	if err := report.WriteGradescope(&buf, results, time.Second); err != nil {
		t.Fatal(err)
	}
	var gs struct {
		Score float64 `json:"score"`
		Tests []struct {
			Name     string  `json:"name"`
			Number   string  `json:"number"`
			Score    float64 `json:"score"`
			MaxScore float64 `json:"max_score"`
			Status   string  `json:"status"`
			Output   string  `json:"output"`
		} `json:"tests"`
	}
	if err := json.Unmarshal(buf.Bytes(), &gs); err != nil {
		t.Fatalf("results.json: %v\n%s", err, buf.Bytes())
	}
	// One test per part of each step (a step without parts is one test),
	// each step worth one point in all.
	want := 0
	for _, r := range results {
		want += max(1, len(r.Parts))
	}
	if got := len(gs.Tests); got != want {
		t.Fatalf("results.json has %d tests, want %d (one per part)", got, want)
	}
	last := gs.Tests[len(gs.Tests)-1]
	if math.Abs(gs.Score-8) > 1e-6 || !strings.HasPrefix(last.Number, "8") || last.Status != "passed" ||
		!strings.Contains(last.Output, "Why:") {
		t.Errorf("results.json = %+v", gs)
	}

	buf.Reset()
	if err := report.WriteJUnit(&buf, results, time.Second); err != nil {
		t.Fatal(err)
	}
	var ju struct {
		Suite struct {
			Tests    int `xml:"tests,attr"`
			Failures int `xml:"failures,attr"`
			Cases    []struct {
				Name string `xml:"name,attr"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	if err := xml.Unmarshal(buf.Bytes(), &ju); err != nil {
		t.Fatalf("junit: %v", err)
	}
	if n := len(ju.Suite.Cases); ju.Suite.Tests != want || ju.Suite.Failures != 0 || n != want || !strings.HasPrefix(ju.Suite.Cases[n-1].Name, "step8_crash") {
		t.Errorf("junit = %+v", ju)
	}

	buf.Reset()
	if err := report.WriteHTML(&buf, report.HTMLReport{Title: "t", Bin: refBin, When: time.Now(), Results: results}); err != nil {
		t.Fatal(err)
	}
	html := buf.String()
	for _, want := range []string{`<svg id="timeline-step8-`, "exit 73", "SIGKILL", "token 2", "not applied"} {
		if !strings.Contains(html, want) {
			t.Errorf("the HTML report lacks %q", want)
		}
	}
	if strings.Contains(html, "<script") || strings.Contains(html, "http://") && !strings.Contains(html, `xmlns="http://www.w3.org/2000/svg"`) {
		t.Errorf("the HTML report must be self-contained")
	}
}

// BenchmarkLabAllSteps measures the wall time of all eight steps against the
// reference, and beside it the floor: what the process starts and commits the
// run needed cost on this machine, measured in the same run.
func BenchmarkLabAllSteps(b *testing.B) {
	var floor harness.Floor
	var wall time.Duration
	for b.Loop() {
		t0 := time.Now()
		results := labsteps.RunSteps(context.Background(), cfg(b, refBin), labsteps.Steps(), nil)
		wall = time.Since(t0)
		for _, r := range results {
			if !r.Pass {
				b.Fatalf("step %d failed:\n%s", r.Step.Num, r.Detail())
			}
		}
		b.StopTimer()
		f, err := harness.MeasureFloor(context.Background(), refBin, b.TempDir(), results)
		if err != nil {
			b.Fatal(err)
		}
		floor = f
		b.StartTimer()
	}
	b.ReportMetric(float64(floor.Procs), "procs/op")
	b.ReportMetric(float64(floor.Commits), "commits/op")
	b.ReportMetric(float64(floor.Serial.Milliseconds()), "floor-serial-ms/op")
	b.ReportMetric(float64(floor.Parallel.Milliseconds()), "floor-2core-ms/op")
	if floor.Parallel > 0 {
		b.ReportMetric(wall.Seconds()/floor.Parallel.Seconds(), "wall/floor")
	}
}
