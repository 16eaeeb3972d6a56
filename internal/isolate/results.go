package isolate

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"snacklab/internal/grade"
	"snacklab/labsteps"
)

// gradescope is results.json as the lab writes it (labsteps.WriteGradescope).
type gradescope struct {
	Score         float64          `json:"score"`
	OutputFormat  string           `json:"output_format,omitempty"` // "text": a compiler's <-chan is not HTML
	ExecutionTime float64          `json:"execution_time"`
	Output        string           `json:"output"`
	Visibility    string           `json:"visibility"`
	Tests         []gradescopeTest `json:"tests"`
}

type gradescopeTest struct {
	Name       string  `json:"name"`
	Number     string  `json:"number"`
	Score      float64 `json:"score"`
	MaxScore   float64 `json:"max_score"`
	Status     string  `json:"status"`
	Output     string  `json:"output"`
	Visibility string  `json:"visibility"`
}

// WallReason starts the reason of every step a container killed at the
// wall-clock limit had not reported.
const WallReason = "wall-clock limit"

// interpret turns what the container did into the outcome's steps: the
// lab's results when it wrote them; otherwise the steps its progress lines
// reported, and a failure saying why for the others.
func (o *Outcome) interpret(opt Options, res containerResult) {
	rest, marker := strings.CutPrefix(res.stderr, isolatedMarker+"\n")
	if !marker {
		// Not the lab this engine checked, or it died before main: trust
		// nothing it printed.
		o.Problem = "the lab in the container did not start as an isolated grader" + o.ending(res)
		o.fill(nil, o.Problem)
		return
	}
	o.Stderr = rest
	if res.stderrCut {
		o.Stderr += "\n… (cut)"
	}
	if g, tail, ok := parseResults(rest, opt.Steps); ok {
		o.Stderr = tail
		reported := map[int]StepOutcome{}
		for _, t := range g.Tests {
			n, _ := strconv.Atoi(t.Number)
			reported[n] = stepFromOutput(n, t.Status == "passed", t.Output)
		}
		o.fill(reported, "")
		return
	}
	// No results: the lab was killed or died. What its progress lines had
	// reported stands; the rest fail with the reason.
	reported := parseProgress(res.stdout)
	why := o.ending(res)
	if res.wall {
		o.Problem = fmt.Sprintf("%s: the container was still running after %v and was killed from outside", WallReason, o.Limits.Wall)
	} else {
		o.Problem = "the lab ended without writing its results" + why
	}
	o.fill(reported, o.Problem+"; this step had not been reported")
}

// ending says how the container ended, for a reason: the exit code, the
// memory or pids limit when they are the likely cause, the last line the
// lab printed on stderr.
func (o *Outcome) ending(res containerResult) string {
	if res.wall {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, " (exit %d", res.code)
	if res.oom {
		fmt.Fprintf(&b, "; the memory limit of %d MiB was reached", o.Limits.Memory>>20)
	}
	last := crashLine(res.stderr)
	if strings.Contains(res.stderr, "failed to create new OS thread") || strings.Contains(res.stderr, "resource temporarily unavailable") {
		fmt.Fprintf(&b, "; the pids limit of %d processes and threads was reached", o.Limits.PIDs)
	}
	if last != "" && last != isolatedMarker {
		fmt.Fprintf(&b, "; the lab's stderr ends: %s", clip(last, 200))
	}
	b.WriteString(")")
	return b.String()
}

// fill sets o.Steps for the requested steps: reported ones as reported,
// the others failing with reason.
func (o *Outcome) fill(reported map[int]StepOutcome, reason string) {
	o.Steps, o.Passed = nil, 0
	for _, s := range labsteps.Steps() {
		if !o.wants(s.Num) {
			continue
		}
		so, ok := reported[s.Num]
		if !ok {
			so = StepOutcome{Num: s.Num, Slug: s.Slug, Title: s.Title, Reason: reason,
				Output: fmt.Sprintf("FAIL  %d %s  %s\nChecks: %s\nWhy: %s\n✗ %s\n", s.Num, s.Slug, s.Title, s.Checks, s.Why, reason)}
		}
		if so.Pass {
			o.Passed++
		}
		o.Steps = append(o.Steps, so)
	}
}

func (o *Outcome) wants(n int) bool {
	for _, w := range o.requested {
		if w == n {
			return true
		}
	}
	return false
}

// parseResults reads the Gradescope JSON the lab wrote on stderr and checks
// it covers exactly the requested steps; tail is what followed it.
func parseResults(stderr string, steps []int) (g gradescope, tail string, ok bool) {
	s := strings.TrimLeft(stderr, " \t\r\n")
	if !strings.HasPrefix(s, "{") {
		return g, "", false
	}
	dec := json.NewDecoder(strings.NewReader(s))
	if err := dec.Decode(&g); err != nil {
		return g, "", false
	}
	if len(g.Tests) != len(steps) {
		return g, "", false
	}
	want := map[int]bool{}
	for _, n := range steps {
		want[n] = true
	}
	for _, t := range g.Tests {
		n, err := strconv.Atoi(t.Number)
		if err != nil || !want[n] {
			return g, "", false
		}
		delete(want, n)
	}
	return g, strings.TrimSpace(s[dec.InputOffset():]), true
}

// summaryRE matches labsteps.Result.Summary: "PASS  1 retry   0.21s  Title"
// (the verdict is PASS, FAIL or TIMEOUT: see labsteps.Result.Verdict).
var summaryRE = regexp.MustCompile(`^(PASS|FAIL|TIMEOUT)  (\d+) (\S+)\s+(\d+\.\d+)s  (.*)$`)

// parseProgress reads the steps the lab reported on stdout before it was
// stopped: each Summary line at the start of a line, and for a failure the
// detail indented under it. Text from the graded programs appears only in
// the indented detail, so it cannot fake a summary line.
func parseProgress(stdout string) map[int]StepOutcome {
	out := map[int]StepOutcome{}
	var cur *StepOutcome
	var detail strings.Builder
	flush := func() {
		if cur == nil {
			return
		}
		s := stepByNum(cur.Num)
		text := fmt.Sprintf("%s\nChecks: %s\nWhy: %s\n", strings.SplitN(cur.Output, "\n", 2)[0], s.Checks, s.Why) + detail.String()
		out[cur.Num] = stepFromOutput(cur.Num, cur.Pass, text)
		cur = nil
		detail.Reset()
	}
	sc := bufio.NewScanner(strings.NewReader(stdout))
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		line := sc.Text()
		if d, ok := strings.CutPrefix(line, "      "); ok && cur != nil {
			detail.WriteString(d + "\n")
			continue
		}
		flush()
		m := summaryRE.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		n, _ := strconv.Atoi(m[2])
		if s := stepByNum(n); s.Num == 0 || s.Slug != m[3] {
			continue
		}
		cur = &StepOutcome{Num: n, Pass: m[1] == "PASS", Output: line}
	}
	flush()
	return out
}

func stepByNum(n int) labsteps.Step {
	for _, s := range labsteps.Steps() {
		if s.Num == n {
			return s
		}
	}
	return labsteps.Step{}
}

// stepFromOutput makes a reported step from its output text
// (labsteps.Result.Output's shape).
func stepFromOutput(n int, pass bool, output string) StepOutcome {
	s := stepByNum(n)
	so := StepOutcome{Num: n, Slug: s.Slug, Title: s.Title, Pass: pass, Reported: true, Output: output}
	first, _, _ := strings.Cut(output, "\n")
	if m := summaryRE.FindStringSubmatch(first); m != nil {
		if sec, err := strconv.ParseFloat(m[4], 64); err == nil {
			so.Took = time.Duration(sec * float64(time.Second))
		}
	}
	if !pass {
		so.Reason = reasonOf(output)
	}
	return so
}

// stepFailure is what a failing step's output says went wrong
// (labsteps.Result.Detail): the failed check — what, expected, observed,
// why — and the harness's problem ("time limit of 3s reached"), each on a
// line starting with "✗ ".
type stepFailure struct {
	what, expected, observed, why string
	problem                       string
}

func parseFailure(output string) (f stepFailure, ok bool) {
	lines := strings.Split(output, "\n")
	field := func(j int, key string) (string, bool) {
		if j >= len(lines) {
			return "", false
		}
		return strings.CutPrefix(lines[j], key)
	}
	for i := 0; i < len(lines); i++ {
		what, found := strings.CutPrefix(lines[i], "✗ ")
		if !found {
			continue
		}
		ok = true
		exp, e1 := field(i+1, "  expected: ")
		obs, e2 := field(i+2, "  observed: ")
		if e1 && e2 && f.what == "" {
			// An observed value may span lines (a program's output); why
			// comes after it.
			for j := i + 3; j < len(lines); j++ {
				if why, e3 := field(j, "  why:      "); e3 {
					f.what, f.expected, f.observed, f.why = what, exp, strings.Join(append([]string{obs}, lines[i+3:j]...), "\n"), why
					i = j
					break
				}
			}
			if f.what != "" {
				continue
			}
		}
		if f.problem == "" {
			f.problem = what
		}
	}
	return f, ok
}

// reasonOf says in one line why a step failed.
func reasonOf(output string) string {
	f, ok := parseFailure(output)
	var parts []string
	if f.what != "" {
		parts = append(parts, fmt.Sprintf("%s: expected %s, observed %s", f.what, f.expected, f.observed))
	}
	if f.problem != "" {
		parts = append(parts, f.problem)
	}
	if !ok || len(parts) == 0 {
		return "failed"
	}
	return clip(strings.Join(parts, "; "), 400)
}

// clip joins the lines of s and cuts it to about n bytes.
func clip(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		s = strings.ToValidUTF8(s[:n], "") + " …"
	}
	return s
}

// crashLine is the line of a Go crash that says what happened ("fatal
// error: …", "panic: …", "runtime: failed to create new OS thread …"), or
// else the last line of s.
func crashLine(s string) string {
	for _, l := range strings.Split(s, "\n") {
		for _, p := range []string{"fatal error:", "panic:", "runtime: "} {
			if strings.HasPrefix(l, p) {
				return strings.TrimSpace(l)
			}
		}
	}
	return lastLine(s)
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	return strings.TrimSpace(s)
}

// LabResults are the outcome's steps as labsteps results, the form
// internal/grade folds into its records. A failed check the lab reported is
// rebuilt from its text (what, expected, observed, why); any other failure
// is the result's Problem. Work dirs are not kept: /work was the
// container's.
func (o Outcome) LabResults() []labsteps.Result {
	out := make([]labsteps.Result, 0, len(o.Steps))
	for _, so := range o.Steps {
		r := labsteps.Result{Step: stepByNum(so.Num), Pass: so.Pass, Took: so.Took}
		f, _ := parseFailure(so.Output)
		switch {
		case so.Pass:
			for i := range passedChecks(so.Output) {
				r.Checks = append(r.Checks, labsteps.Check{What: fmt.Sprintf("check %d (in the isolated run)", i+1), OK: true})
			}
		case f.what != "":
			r.Checks = []labsteps.Check{{What: f.what, Expected: f.expected, Observed: f.observed, Why: f.why}}
			r.Problem = f.problem
		default:
			r.Problem = so.Reason
		}
		r.Narrative = so.Output
		out = append(out, r)
	}
	return out
}

// passedChecks reads "N checks passed." from a passing step's output.
func passedChecks(output string) int {
	for _, l := range strings.Split(output, "\n") {
		if f := strings.Fields(l); len(f) == 3 && f[1] == "checks" && f[2] == "passed." {
			if n, err := strconv.Atoi(f[0]); err == nil && n > 0 {
				return n
			}
		}
	}
	return 1
}

// ---- reports ----

// writeReports writes results.json and junit.xml into dir, every text a
// submission could have produced cleaned of control characters first.
func writeReports(dir string, o Outcome) (results, junit string, err error) {
	o.Problem = grade.Clean(o.Problem)
	o.Steps = append([]StepOutcome(nil), o.Steps...)
	for i := range o.Steps {
		o.Steps[i].Output, o.Steps[i].Reason = grade.Clean(o.Steps[i].Output), grade.Clean(o.Steps[i].Reason)
	}
	results, junit = filepath.Join(dir, "results.json"), filepath.Join(dir, "junit.xml")
	if err := labsteps.WriteFile(results, func(w io.Writer) error { return WriteGradescope(w, o) }); err != nil {
		return "", "", err
	}
	if err := labsteps.WriteFile(junit, func(w io.Writer) error { return WriteJUnit(w, o) }); err != nil {
		return results, "", err
	}
	return results, junit, nil
}

// summary is the top-level output line of the reports.
func (o Outcome) summary() string {
	s := fmt.Sprintf("%d of %d lab steps passed (graded in an isolated container: no network, read-only, %d MiB, %d pids, %g CPU, wall-clock limit %v).",
		o.Passed, len(o.Steps), o.Limits.Memory>>20, o.Limits.PIDs, o.Limits.CPUs, o.Limits.Wall)
	if o.Problem != "" {
		s += " " + o.Problem
	} else if o.OOMKilled {
		s += fmt.Sprintf(" A process of the submission was killed at the memory limit of %d MiB.", o.Limits.Memory>>20)
	}
	return s
}

// WriteGradescope writes the outcome as Gradescope's results.json: one test
// per step, one point each, as `lab run --results` does.
func WriteGradescope(w io.Writer, o Outcome) error {
	g := gradescope{Score: float64(o.Passed), OutputFormat: "text", ExecutionTime: o.Took.Seconds(), Output: o.summary(), Visibility: "visible",
		Tests: []gradescopeTest{}}
	for _, s := range o.Steps {
		t := gradescopeTest{Name: fmt.Sprintf("Step %d: %s", s.Num, s.Title), Number: strconv.Itoa(s.Num),
			MaxScore: 1, Status: "failed", Output: s.Output, Visibility: "visible"}
		if s.Pass {
			t.Score, t.Status = 1, "passed"
		}
		g.Tests = append(g.Tests, t)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(g)
}

// WriteJUnit writes the outcome as JUnit XML: one testcase per step, the
// summary as the suite's system-out.
func WriteJUnit(w io.Writer, o Outcome) error {
	s := labsteps.JUnitSuite{Name: "snacklab-lab", Time: labsteps.JUnitSeconds(o.Took.Seconds()), SystemOut: o.summary()}
	for _, st := range o.Steps {
		tc := labsteps.JUnitCase{Name: labsteps.JUnitCaseName(st.Num, st.Slug), Classname: "snacklab.lab",
			Time: labsteps.JUnitSeconds(st.Took.Seconds()), SystemOut: st.Output}
		if !st.Pass {
			tc.Failure = &labsteps.JUnitFailure{Message: st.Reason, Type: "failure", Text: st.Output}
		}
		s.Cases = append(s.Cases, tc)
	}
	return labsteps.EncodeJUnit(w, s)
}
