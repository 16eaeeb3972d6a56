package grade

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"snacklab/labsteps/report"
	"snacklab/labsteps/result"
)

// Record is one submission's grade: what the cohort reports are made of.
// It travels inside the submission's results.json (Gradescope's format, with
// the details in its extra_data fields), so `lab merge` rebuilds the cohort
// reports from results.json files alone.
type Record struct {
	Name    string `json:"submission"`
	Source  string `json:"source"` // the path graded
	Kind    Kind   `json:"kind"`
	Problem string `json:"problem,omitempty"` // why it scored 0 without running: not there, build failed…
	// NotGraded says why the submission has no grade: some part was not
	// judged (a limit the grader set ran out, the grading was interrupted,
	// the grader or its build erred). Its score is not a grade: the tables
	// show none, results.json carries none, lab grade exits 3 naming it.
	NotGraded string       `json:"not_graded,omitempty"`
	Bin       string       `json:"bin,omitempty"` // the executables the steps ran
	Runs      int          `json:"runs"`
	Mode      string       `json:"mode"` // how it was graded: isolated (and how), or unisolated
	Score     float64      `json:"-"`
	Max       float64      `json:"-"`
	Took      float64      `json:"-"`                      // seconds
	BuildOut  string       `json:"build_output,omitempty"` // trimmed compiler output, also in the top-level output
	Steps     []StepRecord `json:"-"`
}

// StepRecord is one step of a submission, over all its runs. Its score is
// the sum of its parts' (see PartRecord).
type StepRecord struct {
	Num    int     `json:"step"`
	Slug   string  `json:"slug"`
	Title  string  `json:"title,omitempty"`
	Points float64 `json:"-"`
	Score  float64 `json:"-"`
	Passes int     `json:"passes"`
	Runs   int     `json:"runs"`            // 0: not run (build failed, invalid submission)
	Wrong  int     `json:"wrong,omitempty"` // runs that failed on a wrong answer
	Flaky  bool    `json:"flaky,omitempty"`
	// NotJudged is why some part was not judged (TIMEOUT, INTERRUPTED,
	// ERROR) when none failed on a wrong answer; "" otherwise.
	NotJudged result.Verdict `json:"not_judged,omitempty"`
	Reason    string         `json:"reason,omitempty"` // the failure, in one line
	Replay    string         `json:"replay,omitempty"` // the command that replays the step
	Kept      []string       `json:"kept,omitempty"`   // work dirs of failing runs
	Output    string         `json:"-"`
	Took      float64        `json:"took_s"` // seconds, the slowest run
	Parts     []PartRecord   `json:"-"`      // one results.json test each; none: the step is one test
}

// PartRecord is one part of a step (harness.Parallel's), scored on its own:
// its points only when it passed every run; a flaky part scores 0.
type PartRecord struct {
	ID     string  `json:"part"`      // "c"
	Name   string  `json:"part_name"` // "c: redirects are never followed"
	Points float64 `json:"-"`
	Score  float64 `json:"-"`
	Passes int     `json:"part_passes"`
	Runs   int     `json:"part_runs"`
	Wrong  int     `json:"part_wrong,omitempty"` // runs that failed on a wrong answer
	// NotJudged: why a run was not judged (TIMEOUT, INTERRUPTED, ERROR).
	NotJudged  result.Verdict `json:"part_not_judged,omitempty"`
	Reason     string         `json:"part_reason,omitempty"` // every failure's plain cause, joined
	Clauses    []string       `json:"clauses,omitempty"`     // the contract clauses its failures judge
	Output     string         `json:"-"`
	Visibility string         `json:"-"`
}

// Status is passed, failed, flaky, not judged or not run, as
// report.PartScore's.
func (p PartRecord) Status() string {
	return report.PartScore{Passes: p.Passes, Runs: p.Runs, Wrong: p.Wrong, NotJudged: p.NotJudged}.Status()
}

// Status is passed, failed, flaky (passed in some runs, failed on a wrong
// answer in others: scored as failed), not judged (no part failed, and
// some part the lab could not judge) or not run.
func (s StepRecord) Status() string {
	switch {
	case s.Runs == 0:
		return "not run"
	case s.Flaky:
		return "flaky"
	case s.Passes < s.Runs && s.NotJudged == "":
		return "failed"
	case s.NotJudged != "":
		return result.NotJudgedWord
	}
	return "passed"
}

// Passed counts the steps that passed every run.
func (r Record) Passed() int {
	n := 0
	for _, s := range r.Steps {
		if s.Status() == "passed" {
			n++
		}
	}
	return n
}

// Flaky lists the steps that both passed and failed.
func (r Record) Flaky() []StepRecord {
	var out []StepRecord
	for _, s := range r.Steps {
		if s.Flaky {
			out = append(out, s)
		}
	}
	return out
}

// ---- Gradescope results.json ----

// testExtra is a results.json test's extra_data: its step and, for a part,
// the part; what ReadResults rebuilds the record from.
type testExtra struct {
	StepRecord
	*PartRecord
}

// maxOutput bounds one test's output (Gradescope shows it on a web page).
const maxOutput = 16 << 10

// Gradescope is a record as results.json: one test per part of each graded
// step (per step when it has no parts) with its points and visibility,
// written by report.EncodeGradescope like every results.json of the lab.
func (r Record) Gradescope(s report.Scheme) report.Gradescope {
	out := report.Gradescope{Score: r.Score, ExecutionTime: r.Took, Visibility: s.Whole(), Extra: r, NotGraded: r.NotGraded != ""}
	out.Output = r.summary()
	if r.BuildOut != "" {
		out.Output += "\n\n" + r.BuildOut
	}
	for _, st := range r.Steps {
		if len(st.Parts) == 0 {
			status := "failed"
			if st.Status() == "passed" {
				status = "passed"
			}
			out.Tests = append(out.Tests, report.GradescopeTest{Name: fmt.Sprintf("Step %d: %s", st.Num, st.Title), Number: strconv.Itoa(st.Num),
				Score: st.Score, MaxScore: st.Points, Status: status, Output: clip(st.Output, maxOutput),
				Visibility: s.VisibilityOf(st.Num, ""), Extra: testExtra{StepRecord: st}})
			continue
		}
		for _, p := range st.Parts {
			status := "failed"
			if p.Status() == "passed" {
				status = "passed"
			}
			ps := report.PartScore{Step: result.Step{Num: st.Num, Title: st.Title}, ID: p.ID, Name: p.Name}
			out.Tests = append(out.Tests, report.GradescopeTest{Name: ps.Title(), Number: ps.Key(),
				Score: p.Score, MaxScore: p.Points, Status: status, Output: clip(p.Output, maxOutput),
				Visibility: cmp.Or(p.Visibility, s.VisibilityOf(st.Num, p.ID)), Extra: testExtra{StepRecord: st, PartRecord: &p}})
		}
	}
	return out
}

// WriteResults writes Gradescope's results.json with every test visible.
func WriteResults(w io.Writer, r Record) error {
	return report.EncodeGradescope(w, r.Gradescope(report.Scheme{}))
}

// summary is the one-paragraph verdict at the top of results.json.
func (r Record) summary() string {
	mode := "\nGraded against " + result.ContractText + "."
	if r.Mode != "" {
		mode = "\nGraded " + r.Mode + ", against " + result.ContractText + "."
	}
	if r.Problem != "" {
		return fmt.Sprintf("%s: 0 of %s points. %s%s", r.Name, num(r.Max), r.Problem, mode)
	}
	if r.NotGraded != "" {
		return fmt.Sprintf("%s: NOT GRADED. %s This is the grader's trouble, not a judgement of your code: no score is given, and a regrade will follow.%s",
			r.Name, r.NotGraded, mode)
	}
	s := fmt.Sprintf("%s: %s of %s points; %d of %d lab steps passed", r.Name, num(r.Score), num(r.Max), r.Passed(), len(r.Steps))
	if r.Runs > 1 {
		s += fmt.Sprintf(" in every one of %d runs", r.Runs)
	}
	s += "."
	for _, st := range r.Steps {
		var failed []string
		for _, p := range st.Parts {
			if p.Status() != "passed" {
				failed = append(failed, p.ID)
			}
		}
		if len(failed) > 0 {
			s += fmt.Sprintf("\nStep %d %s: %s of %s points; parts %s did not pass.", st.Num, st.Slug, num(st.Score), num(st.Points), strings.Join(failed, ", "))
		}
	}
	for _, f := range r.Flaky() {
		s += fmt.Sprintf("\nStep %d %s is flaky: it passed %d of %d runs; its parts that failed in some runs score 0. Re-run it on your machine, repeatedly: %s", f.Num, f.Slug, f.Passes, f.Runs, StudentReplay(f.Num))
	}
	return s + mode
}

// gsIn is results.json as ReadResults reads it back.
type gsIn struct {
	Score         float64 `json:"score"`
	ExecutionTime float64 `json:"execution_time"`
	Tests         []struct {
		Name     string    `json:"name"`
		Score    float64   `json:"score"`
		MaxScore float64   `json:"max_score"`
		Output   string    `json:"output"`
		Visible  string    `json:"visibility"`
		Extra    testExtra `json:"extra_data"`
	} `json:"tests"`
	Extra Record `json:"extra_data"`
}

// ReadResults reads a results.json that lab grade wrote back into a Record:
// the tests of one step's parts join into its StepRecord.
func ReadResults(path string) (Record, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Record{}, err
	}
	var in gsIn
	if err := json.Unmarshal(b, &in); err != nil {
		return Record{}, fmt.Errorf("%s: %w", path, err)
	}
	r := cleanRecord(in.Extra)
	if r.Name == "" {
		return Record{}, fmt.Errorf("%s: not written by lab grade (no extra_data.submission)", path)
	}
	r.Score, r.Took = in.Score, in.ExecutionTime
	for _, t := range in.Tests {
		s := t.Extra.StepRecord
		if n := len(r.Steps); n == 0 || r.Steps[n-1].Num != s.Num {
			if s.Title == "" {
				s.Title = strings.TrimPrefix(t.Name, fmt.Sprintf("Step %d: ", s.Num))
			}
			s.Output = Clean(t.Output)
			r.Steps = append(r.Steps, s)
		}
		st := &r.Steps[len(r.Steps)-1]
		st.Points += t.MaxScore
		st.Score += t.Score
		r.Max += t.MaxScore
		if p := t.Extra.PartRecord; p != nil && p.ID != "" {
			p.Points, p.Score, p.Output, p.Visibility = t.MaxScore, t.Score, Clean(t.Output), t.Visible
			st.Parts = append(st.Parts, *p)
		}
	}
	// Parts' shares (12.5/15) add back to their step's points.
	r.Max = report.Round(r.Max)
	for i := range r.Steps {
		r.Steps[i].Points, r.Steps[i].Score = report.Round(r.Steps[i].Points), report.Round(r.Steps[i].Score)
	}
	return cleanRecord(r), nil
}

// ---- JUnit ----

// WriteJUnit writes JUnit XML: one suite per submission, one testcase per
// step (a failure when any run failed), and a "build" testcase when the
// submission could not be built or found.
func WriteJUnit(w io.Writer, r Record) error {
	class := "snacklab.grade." + r.Name
	s := report.JUnitSuite{Name: r.Name, Time: report.JUnitSeconds(r.Took), Props: report.JUnitProperties{
		{Name: "score", Value: num(r.Score)}, {Name: "max_score", Value: num(r.Max)}, {Name: "source", Value: r.Source},
		{Name: "kind", Value: string(r.Kind)}, {Name: "runs", Value: strconv.Itoa(r.Runs)}, {Name: "mode", Value: r.Mode}}}
	if r.NotGraded != "" {
		s.Props = append(s.Props, report.JUnitProperty{Name: "not_graded", Value: r.NotGraded})
	}
	if r.Problem != "" {
		name := "submission"
		if r.Kind == KindModule {
			name = "build"
		}
		s.Cases = append(s.Cases, report.JUnitCase{Name: name, Classname: class,
			Failure: &report.JUnitFailure{Message: r.Problem, Type: "SubmissionNotGraded", Text: r.BuildOut}})
	}
	for _, st := range r.Steps {
		props := func(points, score float64, passes, runs int) report.JUnitProperties {
			return report.JUnitProperties{{Name: "points", Value: num(points)}, {Name: "score", Value: num(score)},
				{Name: "passes", Value: strconv.Itoa(passes)}, {Name: "runs", Value: strconv.Itoa(runs)}}
		}
		if len(st.Parts) == 0 {
			tc := report.JUnitCase{Name: report.JUnitCaseName(st.Num, st.Slug), Classname: class, Time: report.JUnitSeconds(st.Took),
				Props: props(st.Points, st.Score, st.Passes, st.Runs)}
			switch st.Status() {
			case "not run":
				tc.Skipped = &report.JUnitFailure{Message: "not run: " + r.Problem}
			case result.NotJudgedWord:
				tc.Error = &report.JUnitFailure{Message: fmt.Sprintf("not judged (%s): %s", st.NotJudged, st.Reason), Type: "LabNotJudged", Text: clip(st.Output, maxOutput)}
			case "failed", "flaky":
				msg, typ := st.Reason, "LabStepFailed"
				if st.Flaky {
					typ, msg = "LabStepFlaky", fmt.Sprintf("flaky: passed %d of %d runs; %s", st.Passes, st.Runs, st.Reason)
				}
				tc.Failure = &report.JUnitFailure{Message: msg, Type: typ, Text: clip(st.Output, maxOutput)}
			default:
				tc.SystemOut = clip(st.Output, maxOutput)
			}
			s.Cases = append(s.Cases, tc)
			continue
		}
		for i, p := range st.Parts {
			tc := report.JUnitCase{Name: report.JUnitCaseName(st.Num, st.Slug) + "_" + p.ID, Classname: class,
				Props: props(p.Points, p.Score, p.Passes, p.Runs)}
			if i == 0 {
				tc.Time = report.JUnitSeconds(st.Took)
			}
			switch p.Status() {
			case result.NotJudgedWord:
				tc.Error = &report.JUnitFailure{Message: fmt.Sprintf("not judged (%s): %s", p.NotJudged, p.Reason), Type: "LabNotJudged", Text: clip(p.Output, maxOutput)}
			case "failed", "flaky":
				msg, typ := p.Reason, "LabStepFailed"
				if p.Status() == "flaky" {
					typ, msg = "LabStepFlaky", fmt.Sprintf("flaky: passed %d of %d runs; %s", p.Passes, p.Runs, p.Reason)
				}
				tc.Failure = &report.JUnitFailure{Message: msg, Type: typ, Text: clip(p.Output, maxOutput)}
			default:
				tc.SystemOut = clip(p.Output, maxOutput)
			}
			s.Cases = append(s.Cases, tc)
		}
	}
	return report.EncodeJUnit(w, s)
}

func seconds(d time.Duration) float64 { return float64(d.Milliseconds()) / 1000 }
