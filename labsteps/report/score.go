package report

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"snacklab/labsteps/result"
)

// Gradescope's visibility values (its results.json specification): shown
// at once, never, after the due date, or once the grades are published.
const (
	Visible        = "visible"
	Hidden         = "hidden"
	AfterDueDate   = "after_due_date"
	AfterPublished = "after_published"
)

// Visibilities lists Gradescope's four visibility values.
func Visibilities() []string { return []string{Visible, Hidden, AfterDueDate, AfterPublished} }

// Scheme says how results are scored and who sees them: a step's points are
// split among its parts in proportion to their weights (DefaultWeights,
// else 1, unless given), so
// a step's total is the sum of its parts'; visibility is looked up for the
// part ("6.c"), then its step ("6"), then the whole ("").
type Scheme struct {
	Weights    map[string]float64 // "6.c" → the part's weight in its step
	Visibility map[string]string  // "6.c", "6" or "" → a Gradescope visibility
}

// Key names a part in a Scheme and in reports: "6.c"; "6" for a step
// without parts.
func Key(step int, part string) string {
	if part == "" {
		return strconv.Itoa(step)
	}
	return strconv.Itoa(step) + "." + part
}

// VisibilityOf is the visibility of part id of step n ("" id: the step).
func (s Scheme) VisibilityOf(n int, id string) string {
	for _, k := range []string{Key(n, id), Key(n, ""), ""} {
		if v, ok := s.Visibility[k]; ok && v != "" {
			return v
		}
	}
	return Visible
}

// Whole is the visibility of the whole submission (results.json's top level).
func (s Scheme) Whole() string {
	if v := s.Visibility[""]; v != "" {
		return v
	}
	return Visible
}

// split divides points among parts by weight.
func (s Scheme) split(n int, ids []string, points float64) []float64 {
	w := make([]float64, len(ids))
	total := 0.0
	for i, id := range ids {
		w[i] = 1
		if id != "" {
			w[i] = s.weight(Key(n, id))
		}
		total += w[i]
	}
	out := make([]float64, len(ids))
	for i := range ids {
		if total > 0 {
			out[i] = points * w[i] / total
		}
	}
	return out
}

// PartScore is one scored unit of a step over every run of it: a part, or
// the whole step when it ran no parts.
type PartScore struct {
	Step     result.Step
	ID       string // "c"; "" for a step without parts
	Name     string // "c: redirects are never followed"
	Points   float64
	Score    float64
	Passes   int
	Runs     int            // 0: not run
	Wrong    int            // runs in which it failed on a wrong answer
	Failures []result.Check // from the first run in which the part failed (a wrong answer's first)
	TimedOut bool           // that failure was a wait running out
	Problem  string         // that run's harness went wrong, or it was not reported (result.Result.Problem)
	// NotJudged is why a run was not judged (TIMEOUT, INTERRUPTED, ERROR):
	// the first such run's verdict; "" when every run was judged.
	NotJudged result.Verdict
}

// Flaky says the part passed in some runs and failed on a wrong answer in
// others: it scores 0.
func (p PartScore) Flaky() bool { return p.Passes > 0 && p.Wrong > 0 }

// Status is passed, failed, flaky, not judged (no wrong answer, and some
// run the lab could not judge: it scores nothing and counts for nothing)
// or not run.
func (p PartScore) Status() string {
	switch {
	case p.Runs == 0:
		return "not run"
	case p.Flaky():
		return "flaky"
	case p.Wrong > 0:
		return "failed"
	case p.NotJudged != "":
		return result.NotJudgedWord
	case p.Passes == p.Runs:
		return "passed"
	}
	return "failed"
}

// Key is the part's key: "6.c", or "6".
func (p PartScore) Key() string { return Key(p.Step.Num, p.ID) }

// Title is what a test is called: "Step 6c: redirects are never followed",
// or "Step 4: <the step's title>".
func (p PartScore) Title() string {
	if p.ID == "" {
		return fmt.Sprintf("Step %d: %s", p.Step.Num, p.Step.Title)
	}
	name := p.Name
	if _, rest, ok := strings.Cut(name, ": "); ok && result.PartID(name, -1) == p.ID {
		name = rest
	}
	return fmt.Sprintf("Step %d%s: %s", p.Step.Num, p.ID, name)
}

// ScoreRuns scores one step over its runs (one for lab run, -n for lab
// grade): its points split among its parts, a part scoring only when it
// passed every run. The parts are those of the first run that reached
// them; a step none of whose runs reached its parts is one unit.
func ScoreRuns(step result.Step, runs []result.Result, points float64, s Scheme) []PartScore {
	var names []string
	for _, r := range runs {
		if len(r.Parts) > 0 {
			names = r.Parts
			break
		}
	}
	ids := []string{""}
	if len(names) > 0 {
		ids = make([]string, len(names))
		for i, n := range names {
			ids[i] = result.PartID(n, i)
		}
	}
	pts := s.split(step.Num, ids, points)
	out := make([]PartScore, len(ids))
	for i, id := range ids {
		p := PartScore{Step: step, ID: id, Points: pts[i]}
		if id != "" {
			p.Name = names[i]
		}
		for _, r := range runs {
			o := outcomeOf(r, p.Name, i)
			p.Runs++
			switch {
			case o.Pass:
				p.Passes++
				continue
			case o.Verdict.Judged():
				if p.Wrong == 0 { // a wrong answer explains the part better than a wait
					p.Failures, p.TimedOut, p.Problem = nil, false, ""
				}
				p.Wrong++
			case p.NotJudged == "":
				p.NotJudged = o.Verdict
			}
			if p.Failures == nil && p.Problem == "" {
				p.Failures, p.TimedOut, p.Problem = o.Failures, o.TimedOut, r.Problem
			}
		}
		if p.Runs > 0 && p.Passes == p.Runs {
			p.Score = p.Points
		}
		out[i] = p
	}
	return out
}

// outcomeOf is how part name (i-th) did in r: a run that did not reach the
// parts failed them all.
func outcomeOf(r result.Result, name string, i int) result.PartOutcome {
	for j, o := range r.PartOutcomes() {
		if o.Name == name && (name != "" || j == i) {
			return o
		}
	}
	return result.PartOutcome{Failures: r.Failures(), TimedOut: r.TimedOut, Verdict: r.Verdict()}
}

// Explain is the part's output for a learner: its verdict and every
// failure, plain cause first.
func (p PartScore) Explain() string {
	var b strings.Builder
	verdict := strings.ToUpper(p.Status())
	if p.Status() == result.NotJudgedWord {
		verdict = string(p.NotJudged) // TIMEOUT, INTERRUPTED, ERROR: not a wrong answer
	}
	fmt.Fprintf(&b, "%s  %s  %s of %s points\n", verdict, p.Title(), num(p.Score), num(p.Points))
	if p.Status() == result.NotJudgedWord {
		b.WriteString(NotJudgedNote + "\n")
	}
	if p.Runs > 1 {
		fmt.Fprintf(&b, "Passed %d of %d runs.", p.Passes, p.Runs)
		if p.Flaky() {
			b.WriteString(" Flaky: a part that fails in some runs has a bug the other runs did not hit, and scores 0.")
		}
		b.WriteString("\n")
	}
	for _, c := range p.Failures {
		b.WriteString(c.Explain())
	}
	if p.Problem != "" {
		b.WriteString("✗ " + p.Problem + "\n")
	}
	return b.String()
}

// NotJudgedNote is what every report says of a part the lab could not judge.
const NotJudgedNote = "Not judged: the lab could not judge this part (a limit the grader set ran out, the run was interrupted, or the lab itself erred), so it is not a judgement of your code; it scores nothing and counts for nothing until it is judged again."

// Round rounds a sum of points to a millionth: parts' shares (12.5/15)
// add up to their step's points exactly, as a reader compares them.
func Round(x float64) float64 { return math.Round(x*1e6) / 1e6 }

// num prints points without trailing zeros: 12.5, 10, 0.833.
func num(x float64) string {
	return strconv.FormatFloat(float64(int64(x*1000+0.5*sign(x)))/1000, 'f', -1, 64)
}

func sign(x float64) float64 {
	if x < 0 {
		return -1
	}
	return 1
}
