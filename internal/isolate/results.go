package isolate

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"snacklab/labsteps"
	"snacklab/labsteps/result"
)

// WallReason starts the reason of every step a container killed at the
// wall-clock limit had not reported.
const WallReason = "wall-clock limit"

// interpret turns what the container did into the outcome's steps: the
// lab's results when it wrote them; otherwise the run is not graded, every
// step failing with the reason. Nothing is taken from the lab's progress
// lines on stdout: a stalled or killed lab is exactly when a submission may
// have forged them (issue #19: a FIFO planted at lab.log stalled the lab to
// the wall-clock limit, and forged PASS lines were then counted).
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
	if rs, tail, ok := parseResults(rest, opt.Steps); ok {
		o.Stderr = tail
		o.Reported = rs
		reported := map[int]StepOutcome{}
		for _, r := range rs {
			reported[r.Step.Num] = stepFromResult(r)
		}
		o.fill(reported, "")
		return
	}
	// No results: the lab was killed or died. Not graded.
	o.NotGraded = true
	if res.wall {
		o.Problem = fmt.Sprintf("%s: the container was still running after %v and was killed from outside; %s", WallReason, o.Limits.Wall, NotGradedReason)
	} else {
		o.Problem = "the lab ended without writing its results" + o.ending(res) + "; " + NotGradedReason
	}
	o.fill(nil, o.Problem)
}

// NotGradedReason ends the problem of a run whose lab wrote no results.
const NotGradedReason = "not graded (no step's result is taken from what the lab printed before it stopped)"

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
		fmt.Fprintf(&b, "; the lab's stderr ends: %s", result.OneLine(last, 200))
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

// parseResults reads the results the lab wrote on stderr (result.Encode's
// form: every check, part and event) and checks they cover exactly the
// requested steps; tail is what followed them.
func parseResults(stderr string, steps []int) (rs []result.Result, tail string, ok bool) {
	s := strings.TrimLeft(stderr, " \t\r\n")
	if !strings.HasPrefix(s, "{") {
		return nil, "", false
	}
	dec := json.NewDecoder(strings.NewReader(s))
	rs, err := result.DecodeNext(dec)
	if err != nil || len(rs) != len(steps) {
		return nil, "", false
	}
	want := map[int]bool{}
	for _, n := range steps {
		want[n] = true
	}
	for _, r := range rs {
		if !want[r.Step.Num] {
			return nil, "", false
		}
		delete(want, r.Step.Num)
	}
	return rs, strings.TrimSpace(s[dec.InputOffset():]), true
}

// stepFromResult is a step the lab reported with its result.
func stepFromResult(r result.Result) StepOutcome {
	so := StepOutcome{Num: r.Step.Num, Slug: r.Step.Slug, Title: r.Step.Title, Pass: r.Pass, Reported: true, Took: r.Took,
		Output: r.Output()}
	if !r.Pass {
		var parts []string
		for _, c := range r.Failures() {
			parts = append(parts, c.Cause())
		}
		if r.Problem != "" {
			parts = append(parts, r.Problem)
		}
		so.Reason = result.OneLine(strings.Join(parts, "; "), 400)
		if so.Reason == "" {
			so.Reason = "failed"
		}
	}
	return so
}

// summaryRE matches result.Result.Summary: "PASS  1 retry   0.21s  Title"
// (the verdict is PASS, FAIL or TIMEOUT: see result.Result.Verdict).
var summaryRE = regexp.MustCompile(`^(PASS|FAIL|TIMEOUT)  (\d+) (\S+)\s+(\d+\.\d+)s  (.*)$`)

func stepByNum(n int) labsteps.Step {
	for _, s := range labsteps.Steps() {
		if s.Num == n {
			return s
		}
	}
	return labsteps.Step{}
}

// stepFromOutput makes a reported step from its output text
// (result.Result.Output's shape).
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
// (result.Result.Detail): the failed check — what, expected, observed,
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
	return result.OneLine(strings.Join(parts, "; "), 400)
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
func (o Outcome) LabResults() []result.Result {
	out := make([]result.Result, 0, len(o.Steps))
	reported := map[int]result.Result{}
	for _, r := range o.Reported {
		reported[r.Step.Num] = r
	}
	for _, so := range o.Steps {
		if r, ok := reported[so.Num]; ok {
			r.Dir, r.LogDir = "", ""
			out = append(out, r)
			continue
		}
		r := result.Result{Step: stepByNum(so.Num).Step, Pass: so.Pass, Took: so.Took}
		f, _ := parseFailure(so.Output)
		switch {
		case so.Pass:
			for i := range passedChecks(so.Output) {
				r.Checks = append(r.Checks, result.Check{What: fmt.Sprintf("check %d (in the isolated run)", i+1), OK: true})
			}
		case f.what != "":
			r.Checks = []result.Check{{What: f.what, Expected: f.expected, Observed: f.observed, Why: f.why}}
			r.Problem = f.problem
		default:
			r.Problem = so.Reason
		}
		if !so.Pass && !so.Reported && o.NotGraded {
			r.NotJudged, r.TimedOut = o.notJudged()
		}
		r.Narrative = so.Output
		out = append(out, r)
	}
	return out
}

// notJudged is the verdict of a step the lab did not report, its results
// never written (NotGraded): not judged
// (TIMEOUT at the wall-clock limit, ERROR when the lab died), unless the
// submission's own processes took the container's memory or pids: a
// process that allocates or forks without end is judged, and fails.
func (o Outcome) notJudged() (result.Verdict, bool) {
	switch {
	case o.OOMKilled || strings.Contains(o.Problem, "pids limit"):
		return "", false
	case o.WallLimit:
		return result.Timeout, true
	}
	return result.Error, false
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
