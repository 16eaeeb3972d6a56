package report

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"time"

	"snacklab/labsteps/result"
)

// Gradescope is results.json, Gradescope's autograder format: the one
// encoding that lab run, lab grade and the isolated runner write
// (EncodeGradescope). Field names and values follow Gradescope's
// specification; extra_data carries what a reader of the file (lab grade's
// tables, lab tables) needs beyond it.
type Gradescope struct {
	Score float64 `json:"score"`
	// NotGraded leaves every score out of the file: some part was not
	// judged, and Gradescope shows no score rather than one the grader's
	// own trouble made (Output says why, and that a regrade will follow).
	NotGraded     bool             `json:"-"`
	OutputFormat  string           `json:"output_format"`
	ExecutionTime float64          `json:"execution_time"`
	Output        string           `json:"output"`
	Visibility    string           `json:"visibility"`
	Tests         []GradescopeTest `json:"tests"`
	Extra         any              `json:"extra_data,omitempty"`
}

// GradescopeTest is one test of results.json: a part of a step, or a
// whole step.
type GradescopeTest struct {
	Name         string  `json:"name"`
	Number       string  `json:"number"`
	Score        float64 `json:"score"`
	MaxScore     float64 `json:"max_score"`
	Status       string  `json:"status"` // passed or failed
	Output       string  `json:"output"`
	OutputFormat string  `json:"output_format"`
	Visibility   string  `json:"visibility"`
	Extra        any     `json:"extra_data,omitempty"`
}

// EncodeGradescope writes g as results.json: output_format "text" where
// none is given (a compiler's "<-chan" is not HTML), "visible" where no
// visibility is, and an error for a visibility Gradescope does not know.
func EncodeGradescope(w io.Writer, g Gradescope) error {
	if g.OutputFormat == "" {
		g.OutputFormat = "text"
	}
	if g.Visibility == "" {
		g.Visibility = Visible
	}
	if g.Tests == nil {
		g.Tests = []GradescopeTest{}
	}
	if !slices.Contains(Visibilities(), g.Visibility) {
		return fmt.Errorf("results.json: visibility %q, want one of %v", g.Visibility, Visibilities())
	}
	g.Tests = slices.Clone(g.Tests)
	for i := range g.Tests {
		t := &g.Tests[i]
		if t.OutputFormat == "" {
			t.OutputFormat = "text"
		}
		if t.Visibility == "" {
			t.Visibility = Visible
		}
		if !slices.Contains(Visibilities(), t.Visibility) {
			return fmt.Errorf("results.json: test %q: visibility %q, want one of %v", t.Name, t.Visibility, Visibilities())
		}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if g.NotGraded {
		return enc.Encode(unscored(g))
	}
	return enc.Encode(g)
}

// unscored is g as JSON with no score anywhere (Gradescope.NotGraded).
func unscored(g Gradescope) any {
	type test struct {
		GradescopeTest
		Score *float64 `json:"score,omitempty"`
	}
	out := struct {
		Gradescope
		Score *float64 `json:"score,omitempty"`
		Tests []test   `json:"tests"`
	}{Gradescope: g}
	for _, t := range g.Tests {
		out.Tests = append(out.Tests, test{GradescopeTest: t})
	}
	return out
}

// TestOf is a part's test: its title, number ("6.c"), points, status and
// the learner's output (the part's verdict and failures, then why the step
// matters; a step without parts says what it checks too).
func TestOf(p PartScore, s Scheme) GradescopeTest {
	t := GradescopeTest{Name: p.Title(), Number: p.Key(), Score: p.Score, MaxScore: p.Points, Status: "failed",
		Output: p.Explain(), Visibility: s.VisibilityOf(p.Step.Num, p.ID)}
	// Gradescope knows passed and failed only: a part not judged is
	// "failed" there, with no score (Gradescope.NotGraded) and its output
	// saying it was not judged.
	if p.Status() == "passed" {
		t.Status = "passed"
	}
	if p.ID == "" {
		t.Output += "Checks: " + p.Step.Checks + "\n"
	}
	t.Output += "Why: " + p.Step.Why + "\n"
	return t
}

// PartExtra is a test's extra_data as lab run writes it.
type PartExtra struct {
	Step     int            `json:"step"`
	Slug     string         `json:"slug"`
	Part     string         `json:"part,omitempty"`
	PartName string         `json:"part_name,omitempty"`
	Status   string         `json:"status"`
	Failures []result.Check `json:"failures,omitempty"`
}

// RunExtra is results.json's extra_data as lab run writes it.
type RunExtra struct {
	Contract int           `json:"contract"`
	Limits   result.Limits `json:"limits"`
}

// WriteGradescope writes Gradescope's results.json for one run of steps:
// one point per step, split among its parts (see GradescopeOf).
func WriteGradescope(w io.Writer, results []result.Result, took time.Duration) error {
	return EncodeGradescope(w, GradescopeOf(results, took, Scheme{}, nil))
}

// GradescopeOf is results.json for one run of steps: one test per part
// (per step when it ran none), each step worth points[num] (1 when not
// given) split among its parts by s.
func GradescopeOf(results []result.Result, took time.Duration, s Scheme, points map[int]float64) Gradescope {
	g := Gradescope{ExecutionTime: took.Seconds(), Visibility: s.Whole()}
	passed, parts, partsPassed, unjudged := 0, 0, 0, 0
	for _, r := range results {
		pts, ok := points[r.Step.Num]
		if !ok {
			pts = 1
		}
		if r.Pass {
			passed++
		}
		for _, p := range ScoreRuns(r.Step, []result.Result{r}, pts, s) {
			t := TestOf(p, s)
			t.Extra = PartExtra{Step: r.Step.Num, Slug: r.Step.Slug, Part: p.ID, PartName: p.Name, Status: p.Status(), Failures: p.Failures}
			g.Score += t.Score
			g.Tests = append(g.Tests, t)
			parts++
			switch p.Status() {
			case "passed":
				partsPassed++
			case result.NotJudgedWord:
				unjudged++
			}
		}
	}
	g.Score = Round(g.Score)
	g.Output = fmt.Sprintf("%d of %d lab steps passed; %d of %d parts; graded against %s.", passed, len(results), partsPassed, parts, result.ContractText)
	// The first cause first, as the console says it (Summary).
	for _, b := range Summarize(results, points, s, nil).Blockers {
		g.Output += fmt.Sprintf("\nBlocked by: %s — step %s; it blocks %d part(s): %s.", b.Label, b.First, len(b.Parts), compactParts(b.Parts))
	}
	if unjudged > 0 {
		g.Output += fmt.Sprintf("\nNOT GRADED: %d part(s) not judged (TIMEOUT, INTERRUPTED or ERROR: the lab could not judge them, which is not a wrong answer). No score is given until they are judged: a regrade will follow; on your machine, re-run (on a quieter machine if they timed out).", unjudged)
		g.NotGraded = true
	}
	ex := RunExtra{Contract: result.ContractVersion}
	if len(results) > 0 && results[0].Limits.Wait > 0 {
		g.Output += "\nLimits: " + results[0].Limits.String() + "."
		ex.Limits = results[0].Limits
	}
	g.Extra = ex
	return g
}
