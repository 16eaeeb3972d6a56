package labsteps_test

import (
	"bytes"
	"context"
	"encoding/json"
	stdhtml "html"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"snacklab/labsteps"
	"snacklab/labsteps/mutants"
	"snacklab/labsteps/report"
	"snacklab/labsteps/result"
)

// mutantsBin builds the reference with several mutants applied together,
// into a bin dir of its own.
func mutantsBin(t *testing.T, names ...string) string {
	t.Helper()
	root, err := mutants.ModuleRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	src, bin := filepath.Join(work, "src"), filepath.Join(work, "bin")
	if err := mutants.CopyModule(root, src); err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if err := mutant(t, n).ApplyIn(src); err != nil {
			t.Fatal(err)
		}
	}
	if err := mutants.BuildPrograms(context.Background(), src, bin); err != nil {
		t.Fatal(err)
	}
	return bin
}

// runStep6 runs step 6 once against bin.
func runStep6(t *testing.T, bin string) result.Result {
	t.Helper()
	steps, err := labsteps.Select([]string{"6"})
	if err != nil {
		t.Fatal(err)
	}
	c := cfg(t, bin)
	return labsteps.RunSteps(context.Background(), c, steps, nil)[0]
}

// A sender with two bugs (a loose ack, and a 3xx retried) fails two kinds
// of part of step 6, and every report shows both: the console's detail,
// results.json, JUnit and the HTML page, each failure with its part, its
// clauses and expected / observed / why; the HTML's ✗ lines come before
// the step's long paragraph.
func TestTwoBugsShowEverywhere(t *testing.T) {
	if testing.Short() || !mutants.Available() {
		t.Skip("builds a two-mutant sender and runs step 6")
	}
	r := runStep6(t, mutantsBin(t, "loose-ack", "3xx-as-retry"))
	if r.Pass {
		t.Fatal("step 6 passed a sender with two bugs")
	}
	failed := strings.Join(r.FailedParts(), " ")
	// loose-ack: ack-1 in part a (the real receiver); 3xx-as-retry: part c.
	for _, want := range []string{"a", "c"} {
		if !strings.Contains(" "+failed+" ", " "+want+" ") {
			t.Errorf("failed parts = %q, want part %s among them:\n%s", failed, want, r.Detail())
		}
	}
	var fails []result.Check
	for _, c := range r.Failures() {
		if c.Part == "" {
			t.Errorf("failure %q names no part", c.What)
		}
		if strings.HasPrefix(c.Part, "a:") || strings.HasPrefix(c.Part, "c:") {
			fails = append(fails, c)
		}
	}
	var gs, junit, html bytes.Buffer
	if err := report.WriteGradescope(&gs, []result.Result{r}, time.Second); err != nil {
		t.Fatal(err)
	}
	if err := report.WriteJUnit(&junit, []result.Result{r}, time.Second); err != nil {
		t.Fatal(err)
	}
	if err := report.WriteHTML(&html, report.HTMLReport{Title: "t", Results: []result.Result{r}}); err != nil {
		t.Fatal(err)
	}
	var doc report.Gradescope
	if err := json.Unmarshal(gs.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	var gsText strings.Builder
	for _, tc := range doc.Tests {
		gsText.WriteString(tc.Output)
	}
	if len(fails) < 2 {
		t.Fatalf("%d failures in parts a and c, want at least 2:\n%s", len(fails), r.Detail())
	}
	for name, text := range map[string]string{"console": r.Detail(), "results.json": gsText.String(),
		"JUnit": junit.String(), "HTML": html.String()} {
		text = stdhtml.UnescapeString(text) // XML's and HTML's entities alike
		for _, c := range fails {
			want := []string{c.What, c.Part, "expected: " + c.Expected, "why:      " + c.Why}
			if len(c.Clause) > 0 {
				want = append(want, "clause:   "+strings.Join(c.Clause, " "))
			}
			for _, w := range want {
				if !strings.Contains(text, w) {
					t.Errorf("%s lacks %q of the failure %q", name, w, c.What)
				}
			}
		}
	}
	page := html.String()
	if x, p := strings.Index(page, "✗"), strings.Index(page, `<span class="why">Why:`); x < 0 || p < 0 || x > p {
		t.Errorf("HTML: the first ✗ is at %d, the step's paragraph at %d: want the ✗ first", x, p)
	}
}

// One wrong part of step 6 costs that part only: a sender that accepts
// --timeout-ms 0 fails part n (its flags at their bounds) and keeps the
// other parts' shares of the step's points.
func TestOnePartWrongScoresTheRest(t *testing.T) {
	if testing.Short() || !mutants.Available() {
		t.Skip("builds a mutant and runs step 6")
	}
	r := runStep6(t, mutantsBin(t, "sender-timeout-zero-accepted"))
	if got, want := strings.Join(r.FailedParts(), " "), "n"; got != want {
		t.Fatalf("failed parts = %q, want %q:\n%s", got, want, r.Detail())
	}
	parts := len(r.PartOutcomes())
	g := report.GradescopeOf([]result.Result{r}, time.Second, report.Scheme{}, map[int]float64{6: 15})
	if got, want := len(g.Tests), parts; got != want || parts < 2 {
		t.Fatalf("results.json has %d tests, want %d (one per part)", got, want)
	}
	weighted := float64(parts) // the parts that weigh (report.DefaultWeights), n among them
	for _, o := range r.PartOutcomes() {
		if w, ok := report.DefaultWeights()[report.Key(6, o.ID)]; ok {
			weighted += w - 1
		}
	}
	if got, want := g.Score, 15*(weighted-1)/weighted; got < want-1e-5 || got > want+1e-5 {
		t.Errorf("score = %v, want %v", got, want)
	}
	for _, tc := range g.Tests {
		if want := map[bool]string{true: "failed", false: "passed"}[tc.Number == "6.n"]; tc.Status != want {
			t.Errorf("test %s %q: status %s, want %s", tc.Number, tc.Name, tc.Status, want)
		}
	}
}
