package grade

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"snacklab/labsteps"
)

// Record is one submission's grade: what the cohort reports are made of.
// It travels inside the submission's results.json (Gradescope's format, with
// the details in its extra_data fields), so `lab merge` rebuilds the cohort
// reports from results.json files alone.
type Record struct {
	Name     string       `json:"submission"`
	Source   string       `json:"source"` // the path graded
	Kind     Kind         `json:"kind"`
	Problem  string       `json:"problem,omitempty"` // why it scored 0 without running: not there, build failed…
	Bin      string       `json:"bin,omitempty"`     // the executables the steps ran
	Runs     int          `json:"runs"`
	Mode     string       `json:"mode"` // how it was graded: isolated (and how), or unisolated
	Score    float64      `json:"-"`
	Max      float64      `json:"-"`
	Took     float64      `json:"-"`                      // seconds
	BuildOut string       `json:"build_output,omitempty"` // trimmed compiler output, also in the top-level output
	Steps    []StepRecord `json:"-"`
}

// StepRecord is one step of a submission, over all its runs.
type StepRecord struct {
	Num    int      `json:"step"`
	Slug   string   `json:"slug"`
	Title  string   `json:"-"`
	Points float64  `json:"-"`
	Score  float64  `json:"-"`
	Passes int      `json:"passes"`
	Runs   int      `json:"runs"` // 0: not run (build failed, invalid submission)
	Flaky  bool     `json:"flaky,omitempty"`
	Reason string   `json:"reason,omitempty"` // the failure, in one line
	Replay string   `json:"replay,omitempty"` // the command that replays the step
	Kept   []string `json:"kept,omitempty"`   // work dirs of failing runs
	Output string   `json:"-"`
	Took   float64  `json:"took_s"` // seconds, the slowest run
}

// Status is passed, failed, flaky (passed in some runs, failed in others:
// scored as failed) or not run.
func (s StepRecord) Status() string {
	switch {
	case s.Runs == 0:
		return "not run"
	case s.Flaky:
		return "flaky"
	case s.Passes == s.Runs:
		return "passed"
	}
	return "failed"
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

type gsTest struct {
	Name         string     `json:"name"`
	OutputFormat string     `json:"output_format"`
	Number       string     `json:"number"`
	Score        float64    `json:"score"`
	MaxScore     float64    `json:"max_score"`
	Status       string     `json:"status"`
	Output       string     `json:"output"`
	Visibility   string     `json:"visibility"`
	Extra        StepRecord `json:"extra_data"`
}

type gsResults struct {
	Score         float64  `json:"score"`
	OutputFormat  string   `json:"output_format"`
	ExecutionTime float64  `json:"execution_time"`
	Output        string   `json:"output"`
	Visibility    string   `json:"visibility"`
	Tests         []gsTest `json:"tests"`
	Extra         Record   `json:"extra_data"`
}

// maxOutput bounds one test's output (Gradescope shows it on a web page).
const maxOutput = 16 << 10

// WriteResults writes Gradescope's results.json: one test per graded step
// with its points, the top-level output saying the verdict (and the
// compiler's output when the build failed).
func WriteResults(w io.Writer, r Record) error {
	// output_format text: a compiler error's "<-chan" is not HTML.
	out := gsResults{Score: r.Score, OutputFormat: "text", ExecutionTime: r.Took, Visibility: "visible", Tests: []gsTest{}, Extra: r}
	out.Output = r.summary()
	if r.BuildOut != "" {
		out.Output += "\n\n" + r.BuildOut
	}
	for _, s := range r.Steps {
		status := "failed"
		if s.Status() == "passed" {
			status = "passed"
		}
		out.Tests = append(out.Tests, gsTest{Name: fmt.Sprintf("Step %d: %s", s.Num, s.Title), OutputFormat: "text", Number: strconv.Itoa(s.Num),
			Score: s.Score, MaxScore: s.Points, Status: status, Output: clip(s.Output, maxOutput), Visibility: "visible",
			Extra: s})
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

// summary is the one-paragraph verdict at the top of results.json.
func (r Record) summary() string {
	mode := ""
	if r.Mode != "" {
		mode = "\nGraded " + r.Mode + "."
	}
	if r.Problem != "" {
		return fmt.Sprintf("%s: 0 of %s points. %s%s", r.Name, num(r.Max), r.Problem, mode)
	}
	s := fmt.Sprintf("%s: %s of %s points; %d of %d lab steps passed", r.Name, num(r.Score), num(r.Max), r.Passed(), len(r.Steps))
	if r.Runs > 1 {
		s += fmt.Sprintf(" in every one of %d runs", r.Runs)
	}
	s += "."
	for _, f := range r.Flaky() {
		s += fmt.Sprintf("\nStep %d %s is flaky: it passed %d of %d runs and scores 0. Re-run it on your machine, repeatedly: %s", f.Num, f.Slug, f.Passes, f.Runs, StudentReplay(f.Num))
	}
	return s + mode
}

// ReadResults reads a results.json that WriteResults wrote back into a Record.
func ReadResults(path string) (Record, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Record{}, err
	}
	var in gsResults
	if err := json.Unmarshal(b, &in); err != nil {
		return Record{}, fmt.Errorf("%s: %w", path, err)
	}
	r := cleanRecord(in.Extra)
	if r.Name == "" {
		return Record{}, fmt.Errorf("%s: not written by lab grade (no extra_data.submission)", path)
	}
	r.Score, r.Took = in.Score, in.ExecutionTime
	for _, t := range in.Tests {
		s := t.Extra
		s.Title = strings.TrimPrefix(t.Name, fmt.Sprintf("Step %d: ", s.Num))
		s.Points, s.Score, s.Output = t.MaxScore, t.Score, Clean(t.Output)
		r.Max += s.Points
		r.Steps = append(r.Steps, s)
	}
	return r, nil
}

// ---- JUnit ----

// WriteJUnit writes JUnit XML: one suite per submission, one testcase per
// step (a failure when any run failed), and a "build" testcase when the
// submission could not be built or found.
func WriteJUnit(w io.Writer, r Record) error {
	class := "snacklab.grade." + r.Name
	s := labsteps.JUnitSuite{Name: r.Name, Time: labsteps.JUnitSeconds(r.Took), Props: labsteps.JUnitProperties{
		{Name: "score", Value: num(r.Score)}, {Name: "max_score", Value: num(r.Max)}, {Name: "source", Value: r.Source},
		{Name: "kind", Value: string(r.Kind)}, {Name: "runs", Value: strconv.Itoa(r.Runs)}, {Name: "mode", Value: r.Mode}}}
	if r.Problem != "" {
		name := "submission"
		if r.Kind == KindModule {
			name = "build"
		}
		s.Cases = append(s.Cases, labsteps.JUnitCase{Name: name, Classname: class,
			Failure: &labsteps.JUnitFailure{Message: r.Problem, Type: "SubmissionNotGraded", Text: r.BuildOut}})
	}
	for _, st := range r.Steps {
		tc := labsteps.JUnitCase{Name: labsteps.JUnitCaseName(st.Num, st.Slug), Classname: class, Time: labsteps.JUnitSeconds(st.Took),
			Props: labsteps.JUnitProperties{{Name: "points", Value: num(st.Points)}, {Name: "score", Value: num(st.Score)},
				{Name: "passes", Value: strconv.Itoa(st.Passes)}, {Name: "runs", Value: strconv.Itoa(st.Runs)}}}
		switch st.Status() {
		case "not run":
			tc.Skipped = &labsteps.JUnitFailure{Message: "not run: " + r.Problem}
		case "failed", "flaky":
			msg := st.Reason
			typ := "LabStepFailed"
			if st.Flaky {
				typ = "LabStepFlaky"
				msg = fmt.Sprintf("flaky: passed %d of %d runs; %s", st.Passes, st.Runs, st.Reason)
			}
			tc.Failure = &labsteps.JUnitFailure{Message: msg, Type: typ, Text: clip(st.Output, maxOutput)}
		default:
			tc.SystemOut = clip(st.Output, maxOutput)
		}
		s.Cases = append(s.Cases, tc)
	}
	return labsteps.EncodeJUnit(w, s)
}

func seconds(d time.Duration) float64 { return float64(d.Milliseconds()) / 1000 }
