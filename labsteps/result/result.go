package result

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Step is what a result says about the step it comes from: its number and
// name, and the prose a learner reads beside its verdict.
type Step struct {
	Num   int    `json:"num"`
	Slug  string `json:"slug"`  // short name: retry, durable, claim…
	Title string `json:"title"` // what a learner reads in the PASS/FAIL line
	// Checks says in one paragraph what the step checks; Why says why it matters.
	Checks string `json:"checks"`
	Why    string `json:"why"`
}

// Name is "3 claim".
func (s Step) Name() string { return strconv.Itoa(s.Num) + " " + s.Slug }

// Check is one judgement a step made: what was looked at, what the contract
// expects, what the implementation did, and why it matters.
type Check struct {
	What     string        `json:"what"`
	Expected string        `json:"expected"`
	Observed string        `json:"observed"`
	Why      string        `json:"why"`
	OK       bool          `json:"ok"`
	At       time.Duration `json:"at_ns"`
	// TimedOut says the check failed because a wait ran out (the process
	// was still running, its output still open, or the step's time limit
	// was reached), not because the implementation answered wrongly: on a
	// busy machine, a reason to re-run rather than a wrong answer.
	TimedOut bool `json:"timed_out,omitempty"`
	// Clause names the CONTRACT.md clause ids (§2.enqueue.dup) the check
	// judges.
	Clause []string `json:"clause,omitempty"`
	// Part is the part of the step (harness.Part's name, "c: redirects are
	// never followed") the check was made in; "" outside any part.
	Part string `json:"part,omitempty"`
}

// Verdict is a result's one word. PASS and FAIL judge the implementation;
// the others say the lab could not judge it (Judged is false): a step or
// part with such a verdict scores nothing and counts for nothing, and a
// grade that has one is "not graded", never a number below full marks
// that the grader's own trouble put there.
type Verdict string

// The verdicts.
const (
	Pass        Verdict = "PASS"
	Fail        Verdict = "FAIL"        // a wrong answer: the implementation was judged and did not pass
	Timeout     Verdict = "TIMEOUT"     // not judged: a wait or a limit the grader set ran out (see Result.TimedOut)
	Interrupted Verdict = "INTERRUPTED" // not judged: the run was stopped (Ctrl-C, SIGTERM) before it ended
	Error       Verdict = "ERROR"       // not judged: the lab or the grader itself went wrong
)

// Judged says the verdict judges the implementation: PASS or FAIL.
func (v Verdict) Judged() bool { return v == Pass || v == Fail }

// Word is the verdict in the three-word vocabulary every output shares:
// passed, failed, or not judged.
func (v Verdict) Word() string {
	switch v {
	case Pass:
		return "passed"
	case Fail:
		return "failed"
	}
	return NotJudgedWord
}

// NotJudgedWord is how every output names a verdict that is not a judgement.
const NotJudgedWord = "not judged"

// Result is what one step found.
type Result struct {
	Step      Step          `json:"step"`
	Pass      bool          `json:"pass"`
	Took      time.Duration `json:"took_ns"`
	Checks    []Check       `json:"checks"`
	Events    []Event       `json:"events,omitempty"`
	Narrative string        `json:"narrative,omitempty"`
	Dir       string        `json:"dir,omitempty"` // the work dir; "" once removed (a passing step without Keep)
	LogDir    string        `json:"log_dir,omitempty"`
	Problem   string        `json:"problem,omitempty"` // the harness itself went wrong (a panic, a missing dir)
	Procs     int           `json:"procs"`             // processes the step started
	Commits   int           `json:"commits"`           // commits they made, counted from what they printed
	Waits     time.Duration `json:"waits_ns"`          // time spent waiting for the real clock
	// TimedOut says the step failed because a wait ran out (a process still
	// running, output still open, the step's time limit), not because of a
	// wrong answer: on a busy machine, re-run before believing it.
	TimedOut bool `json:"timed_out,omitempty"`
	// NotJudged says the lab could not judge the step for a reason other
	// than a wait running out (TimedOut): Interrupted or Error; Problem
	// says more. "" when it was judged, or only timed out.
	NotJudged Verdict `json:"not_judged,omitempty"`
	// Limits are the waits the step ran with, and the calibration they
	// were derived from.
	Limits Limits `json:"limits"`
	// Parts are the names of the parts the step ran (harness.Parallel), in
	// the order it declared them: each is scored on its own.
	Parts []string `json:"parts,omitempty"`
}

// Verdict is PASS, FAIL (a wrong answer), or why the step was not judged:
// TIMEOUT (a wait ran out: see TimedOut), INTERRUPTED or ERROR (NotJudged).
// A step with a wrong answer in one part is FAIL whatever stopped another.
func (r Result) Verdict() Verdict {
	switch {
	case r.Pass:
		return Pass
	case r.NotJudged != "" && !r.wrong():
		return r.NotJudged
	case r.TimedOut:
		return Timeout
	}
	return Fail
}

// wrong says some check failed on a wrong answer (not a wait running out).
func (r Result) wrong() bool {
	for _, c := range r.Checks {
		if !c.OK && !c.TimedOut {
			return true
		}
	}
	return false
}

// Failed is the first check that failed the step, or nil. A step's parts
// run to their own first failure: see Failures for all of them.
func (r Result) Failed() *Check {
	for i := range r.Checks {
		if !r.Checks[i].OK {
			return &r.Checks[i]
		}
	}
	return nil
}

// Failures are every check that failed, in the order of the step's parts:
// a learner with two bugs sees both in one run.
func (r Result) Failures() []Check {
	var out []Check
	for _, c := range r.Checks {
		if !c.OK {
			out = append(out, c)
		}
	}
	return out
}

// Summary is the one-line verdict of a result, for reports.
func (r Result) Summary() string {
	return fmt.Sprintf("%s  %d %-9s %6.2fs  %s", r.Verdict(), r.Step.Num, r.Step.Slug, r.Took.Seconds(), r.Step.Title)
}

// Cause is a failed check in one plain line, the first thing a learner
// reads: "[c] c-301: sender run-once exit code: expected exit 21, observed
// exit 0".
func (c Check) Cause() string {
	s := c.What
	if id := PartID(c.Part, -1); id != "" {
		s = "[" + id + "] " + s
	}
	if c.TimedOut {
		s = "TIMEOUT " + s
	}
	obs := c.Observed
	if first, _, cut := strings.Cut(obs, "\n"); cut {
		obs = first + " …"
	}
	if len(obs) > 160 {
		obs = strings.ToValidUTF8(obs[:160], "") + " …"
	}
	// What the program itself said (its stderr, quoted by the harness as
	// "(stderr: LINE…") is the plainest cause there is ("not implemented"):
	// when the observation is long, it comes first.
	said := ""
	if line := stderrLine(c.Observed); line != "" && !strings.Contains(obs, line) {
		said = fmt.Sprintf(" it said %q —", line)
	}
	return fmt.Sprintf("%s:%s expected %s, observed %s", s, said, OneLine(c.Expected, 0), obs)
}

// stderrLine is the line of a program's stderr an observation quotes
// ("… (stderr: not implemented; all of it in …)"), or "".
func stderrLine(observed string) string {
	i := strings.LastIndex(observed, "(stderr: ")
	if i < 0 {
		return ""
	}
	line := observed[i+len("(stderr: "):]
	if j := strings.IndexAny(line, ";)\n"); j >= 0 {
		line = line[:j]
	}
	line, _, _ = strings.Cut(line, " … ")
	line = strings.TrimSpace(line)
	if strings.HasSuffix(line, ".stderr") || len(line) > 120 {
		return "" // only where the log is, or too long to lead with
	}
	return line
}

// Explain is a failed check in full: its plain cause on the ✗ line, then
// its part, the contract clauses it judges, expected, observed and why.
func (c Check) Explain() string {
	var b strings.Builder
	fmt.Fprintf(&b, "✗ %s\n", c.Cause())
	if c.Part != "" {
		fmt.Fprintf(&b, "  part:     %s\n", c.Part)
	}
	if len(c.Clause) > 0 {
		fmt.Fprintf(&b, "  clause:   %s\n", strings.Join(c.Clause, " "))
	}
	fmt.Fprintf(&b, "  expected: %s\n  observed: %s\n  why:      %s\n", c.Expected, c.Observed, c.Why)
	return b.String()
}

// OneLine joins the lines of s with single spaces and, when max > 0, cuts
// it to about max bytes (valid UTF-8, marked " …"): a reason or a program's
// output fit for one line of a report or a table.
func OneLine(s string, max int) string {
	s = strings.Join(strings.Fields(s), " ")
	if max > 0 && len(s) > max {
		s = strings.ToValidUTF8(s[:max], "") + " …"
	}
	return s
}

// Detail explains a failure: every failed check (its plain cause first,
// then part, clause, expected, observed, why) and where the logs are. It is
// "" for a pass.
func (r Result) Detail() string {
	if r.Pass {
		return ""
	}
	var b strings.Builder
	if r.Verdict() == Interrupted {
		// What failed after the interrupt was cut short, not judged: a
		// list of those checks would read as failures.
		fmt.Fprintf(&b, "not judged: %s; %d checks had passed\n", r.Problem, len(r.Checks)-len(r.Failures()))
		return b.String()
	}
	fails := r.Failures()
	if len(r.Parts) > 0 {
		var failed, unjudged []string
		for _, p := range r.PartOutcomes() {
			switch {
			case p.Pass || p.ID == "":
			case p.Verdict.Judged():
				failed = append(failed, p.ID)
			default:
				unjudged = append(unjudged, p.ID)
			}
		}
		if len(failed) > 0 {
			fmt.Fprintf(&b, "%d of %d parts failed: %s\n", len(failed), len(r.Parts), strings.Join(failed, ", "))
		}
		if len(unjudged) > 0 {
			fmt.Fprintf(&b, "%d of %d parts not judged (a wait ran out, not a wrong answer): %s\n", len(unjudged), len(r.Parts), strings.Join(unjudged, ", "))
		}
	}
	for _, c := range fails {
		b.WriteString(c.Explain())
	}
	if r.Problem != "" {
		fmt.Fprintf(&b, "✗ %s\n", r.Problem)
	}
	if r.LogDir != "" {
		fmt.Fprintf(&b, "  logs:     %s (the story: %s/lab.log)\n", r.LogDir, r.Dir)
	}
	return b.String()
}

// Output is what a grader shows for one step: the verdict, on failure the
// detail (every failed check, before the long paragraphs), what was
// checked and why it matters.
func (r Result) Output() string {
	var b strings.Builder
	b.WriteString(r.Summary() + "\n")
	d := r.Detail()
	b.WriteString(d)
	b.WriteString("Checks: " + r.Step.Checks + "\n")
	b.WriteString("Why: " + r.Step.Why + "\n")
	if d == "" {
		fmt.Fprintf(&b, "%d checks passed.\n", len(r.Checks))
	}
	return b.String()
}

// CountNotJudged counts the results the lab could not judge (TIMEOUT,
// INTERRUPTED, ERROR).
func CountNotJudged(rs []Result) int {
	n := 0
	for _, r := range rs {
		if !r.Verdict().Judged() {
			n++
		}
	}
	return n
}
