package report

import (
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
	"sync"

	"snacklab"
	"snacklab/labsteps/clauses"
	"snacklab/labsteps/result"
)

// Mark is a verdict as one character, for a console line a learner scans:
// ✓ passed, ✗ failed, ○ not judged (TIMEOUT, INTERRUPTED, ERROR: not a
// wrong answer, so never the failure's mark).
func Mark(v result.Verdict) string {
	switch v {
	case result.Pass:
		return "✓"
	case result.Fail:
		return "✗"
	}
	return "○"
}

// Blocker is an operation that parts failed on before they reached what
// they are about: an enqueue every later step needs, not written yet. It is
// derived from what the judged program answered (BlockerOf), never from a
// list of the starter's gaps.
type Blocker struct {
	Key   string   // what groups the failures: "Enqueue (queue/queue.go)"
	Label string   // "Enqueue is not implemented (queue/queue.go)"
	First string   // the first part it blocked, in step order: "1 b"
	Parts []string // every part it blocked, as Key(step, part): "1.b"
	// Check is the first blocked part's failure: what the program answered.
	Check result.Check
}

// notImplemented finds a program saying it lacks an operation: "…: not
// implemented (queue/queue.go: Enqueue)", or "claim: not implemented".
var (
	notImplemented = regexp.MustCompile(`not implemented \(([^():]+): ([\w.]+)\)`)
	notImplBare    = regexp.MustCompile(`([\w.-]+): not implemented`)
	// precondition is a check that a step's setup command succeeded:
	// "`queuectl enqueue --db q.db …` succeeds".
	precondition = regexp.MustCompile("^`(queuectl|sender|receiver) ([a-z][a-z-]*)[^`]*` succeeds$")
	exitOf       = regexp.MustCompile(`^(exit \d+|killed[^ ;(]*|timed out)`)
)

// BlockerOf says which operation a failed check shows missing or broken,
// from the program's own answer: a program that says "not implemented"
// names the operation (its function, and the file to write it in); a step's
// setup command that did not succeed (`queuectl enqueue … succeeds`) names
// its verb and how it ended. ok is false for any other failure: a wrong
// answer about the part's own behaviour. strong says the program itself
// named what is missing; a setup failure groups parts only when several
// share it.
func BlockerOf(c result.Check) (key, label string, strong, ok bool) {
	if c.OK {
		return "", "", false, false
	}
	// Where a step quotes what the program said: its observation, and
	// sometimes the check's why ("… (the sender: exit 1 (stderr: …))").
	text := c.Observed + "\n" + c.What + "\n" + c.Why
	if m := notImplemented.FindStringSubmatch(text); m != nil {
		key = fmt.Sprintf("%s (%s)", m[2], m[1])
		return key, fmt.Sprintf("%s is not implemented (%s)", m[2], m[1]), true, true
	}
	if m := notImplBare.FindStringSubmatch(text); m != nil {
		return m[1], m[1] + " is not implemented", true, true
	}
	if m := precondition.FindStringSubmatch(c.What); m != nil && !c.TimedOut {
		how := "failed"
		if e := exitOf.FindString(c.Observed); e != "" {
			how = e
		}
		key = fmt.Sprintf("`%s %s` %s", m[1], m[2], how)
		return key, fmt.Sprintf("`%s %s` does not succeed (%s)", m[1], m[2], how), false, true
	}
	return "", "", false, false
}

// Failure is one failed part as the summary shows it: once, with the
// check that failed it.
type Failure struct {
	Step   result.Step
	Part   result.PartOutcome
	Checks []result.Check
	LogDir string
}

// Summary is a run told in the order a learner acts on it: every step's
// and part's mark, the score, what blocks many parts at once, then each
// remaining failure once.
type Summary struct {
	Results  []result.Result
	Scores   [][]PartScore // per result, its parts' scores
	Blockers []Blocker
	Failures []Failure
	// Last is the last run's results (nil: none at hand): parts that pass
	// now and did not then are marked new.
	Last []result.Result
}

// Summarize makes the summary of one run of results, scored with points
// per step (1 when not given) split by s, and compared with last (nil: no
// last run at hand).
func Summarize(results []result.Result, points map[int]float64, s Scheme, last []result.Result) Summary {
	sum := Summary{Results: results, Last: last}
	type cand struct {
		key, label string
		strong     bool
		part       string
		first      string
		check      result.Check
	}
	var cands []cand
	var failed []Failure
	for _, r := range results {
		pts, ok := points[r.Step.Num]
		if !ok {
			pts = 1
		}
		sum.Scores = append(sum.Scores, ScoreRuns(r.Step, []result.Result{r}, pts, s))
		if r.Verdict() == result.Interrupted {
			continue
		}
		for _, p := range r.PartOutcomes() {
			if p.Verdict != result.Fail || len(p.Failures) == 0 {
				if p.Verdict == result.Fail && r.Problem != "" {
					failed = append(failed, Failure{Step: r.Step, Part: p, LogDir: r.LogDir})
				}
				continue
			}
			first := firstWrong(p.Failures)
			if k, l, strong, ok := BlockerOf(first); ok {
				cands = append(cands, cand{k, l, strong, Key(r.Step.Num, p.ID), strings.TrimSpace(fmt.Sprintf("%d %s", r.Step.Num, p.ID)), first})
				continue
			}
			failed = append(failed, Failure{Step: r.Step, Part: p, Checks: p.Failures, LogDir: r.LogDir})
		}
	}
	count := map[string]int{}
	for _, c := range cands {
		count[c.key]++
	}
	idx := map[string]int{}
	for _, c := range cands {
		if !c.strong && count[c.key] < 2 {
			// One setup failure is that part's own failure, shown as such.
			sum.Failures = append(sum.Failures, failureOf(results, c.part))
			continue
		}
		i, ok := idx[c.key]
		if !ok {
			i = len(sum.Blockers)
			idx[c.key] = i
			sum.Blockers = append(sum.Blockers, Blocker{Key: c.key, Label: c.label, First: c.first, Check: c.check})
		}
		sum.Blockers[i].Parts = append(sum.Blockers[i].Parts, c.part)
	}
	// The blocker of the most parts first: fixing it unblocks the most.
	slices.SortStableFunc(sum.Blockers, func(a, b Blocker) int { return len(b.Parts) - len(a.Parts) })
	sum.Failures = append(sum.Failures, failed...)
	slices.SortStableFunc(sum.Failures, func(a, b Failure) int { return a.Step.Num - b.Step.Num })
	return sum
}

// firstWrong is the first failure that is a wrong answer, else the first.
func firstWrong(fs []result.Check) result.Check {
	for _, c := range fs {
		if !c.TimedOut {
			return c
		}
	}
	return fs[0]
}

// failureOf finds the failure of the part keyed k ("6.c") in results.
func failureOf(results []result.Result, k string) Failure {
	for _, r := range results {
		for _, p := range r.PartOutcomes() {
			if Key(r.Step.Num, p.ID) == k {
				return Failure{Step: r.Step, Part: p, Checks: p.Failures, LogDir: r.LogDir}
			}
		}
	}
	return Failure{}
}

// passedKeys are the keys ("6.c") of the parts that passed in results.
func passedKeys(results []result.Result) map[string]bool {
	out := map[string]bool{}
	for _, r := range results {
		for _, p := range r.PartOutcomes() {
			if p.Pass {
				out[Key(r.Step.Num, p.ID)] = true
			}
		}
	}
	return out
}

// ranKeys are the keys of every part results ran.
func ranKeys(results []result.Result) map[string]bool {
	out := map[string]bool{}
	for _, r := range results {
		for _, p := range r.PartOutcomes() {
			out[Key(r.Step.Num, p.ID)] = true
		}
	}
	return out
}

// Progress compares this run with the last, over the parts both ran: how
// many more parts pass now (negative: fewer), and which pass now that did
// not then.
func (s Summary) Progress() (more int, newly map[string]bool, ok bool) {
	if s.Last == nil {
		return 0, nil, false
	}
	now, then, before := passedKeys(s.Results), passedKeys(s.Last), ranKeys(s.Last)
	newly = map[string]bool{}
	for k := range ranKeys(s.Results) {
		if !before[k] {
			continue
		}
		switch {
		case now[k] && !then[k]:
			more++
			newly[k] = true
		case !now[k] && then[k]:
			more--
		}
	}
	return more, newly, true
}

// StepLine is a step's line in the summary: its mark, number and name,
// time, and each part's mark ("a✓ b✗ c○"), a part that passes now and did
// not in the last run marked "+" ("b✓+").
func StepLine(r result.Result, newly map[string]bool) string {
	v := r.Verdict()
	line := fmt.Sprintf("%s %d %-9s %6.2fs", Mark(v), r.Step.Num, r.Step.Slug, r.Took.Seconds())
	if !v.Judged() {
		line += "  " + string(v)
	}
	var marks []string
	for _, p := range r.PartOutcomes() {
		if p.ID == "" {
			if newly[Key(r.Step.Num, "")] {
				line += "  new ✓"
			}
			continue
		}
		m := p.ID + Mark(p.Verdict)
		if newly[Key(r.Step.Num, p.ID)] {
			m += "+"
		}
		marks = append(marks, m)
	}
	if len(marks) > 0 {
		line += "  " + strings.Join(marks, " ")
	}
	return line
}

// Write prints the summary: the score and progress, then each blocker once
// with the parts it blocks, then every other failure once (expected,
// observed, clause, why, and replay: the command that runs its step again
// with its story, from replay(step)). The step lines (StepLine) are the
// caller's: it prints them as the steps end.
func (s Summary) Write(w io.Writer, replay func(step int) string) {
	parts, passed, unjudged := 0, 0, 0
	score, max := 0.0, 0.0
	for _, ps := range s.Scores {
		for _, p := range ps {
			parts++
			max += p.Points
			score += p.Score
			switch p.Status() {
			case "passed":
				passed++
			case result.NotJudgedWord:
				unjudged++
			}
		}
	}
	fmt.Fprintf(w, "score: %s of %s points; %d of %d parts pass", num(Round(score)), num(Round(max)), passed, parts)
	if unjudged > 0 {
		fmt.Fprintf(w, "; %d %s (○: not a wrong answer, re-run; no score until judged)", unjudged, result.NotJudgedWord)
	}
	fmt.Fprintln(w)
	if more, newly, ok := s.Progress(); ok {
		switch {
		case more > 0:
			fmt.Fprintf(w, "progress: %d more part(s) pass than in your last run (marked +: %s)\n", more, strings.Join(slices.Sorted(keys(newly)), " "))
		case more < 0:
			fmt.Fprintf(w, "progress: %d fewer part(s) pass than in your last run\n", -more)
		default:
			fmt.Fprintln(w, "progress: as many parts pass as in your last run")
		}
	}
	if len(s.Blockers) > 0 {
		fmt.Fprintln(w)
	}
	for _, b := range s.Blockers {
		fmt.Fprintf(w, "blocked by: %s — step %s\n", b.Label, b.First)
		fmt.Fprintf(w, "  %s\n", b.Check.Cause())
		fmt.Fprintf(w, "  blocks %d part(s): %s; replay: %s\n", len(b.Parts), compactParts(b.Parts), replay(stepOf(b.Parts[0])))
	}
	if len(s.Failures) > 0 {
		fmt.Fprintf(w, "\n%d other failure(s):\n", len(s.Failures))
	}
	for _, f := range s.Failures {
		id := strings.TrimSpace(fmt.Sprintf("%d %s", f.Step.Num, f.Part.ID))
		name := f.Part.Name
		if name == "" {
			name = f.Step.Title
		}
		if _, rest, ok := strings.Cut(name, ": "); ok && result.PartID(name, -1) == f.Part.ID {
			name = rest
		}
		fmt.Fprintf(w, "✗ %s  %s\n", id, result.OneLine(name, 100))
		for _, c := range f.Checks {
			fmt.Fprintf(w, "    check:    %s\n", result.OneLine(c.What, 200))
			fmt.Fprintf(w, "    expected: %s\n", result.OneLine(c.Expected, 300))
			fmt.Fprintf(w, "    observed: %s\n", result.OneLine(c.Observed, 300))
			if len(c.Clause) > 0 {
				fmt.Fprintf(w, "    clause:   %s\n", strings.Join(c.Clause, " "))
				for _, l := range Changed(c.Clause) {
					fmt.Fprintf(w, "    %s\n", result.OneLine(l, 400))
				}
			}
			fmt.Fprintf(w, "    why:      %s\n", result.OneLine(c.Why, 300))
		}
		if len(f.Checks) == 0 {
			for _, r := range s.Results {
				if r.Step.Num == f.Step.Num && r.Problem != "" {
					fmt.Fprintf(w, "    problem:  %s\n", result.OneLine(r.Problem, 300))
				}
			}
		}
		logs := ""
		if f.LogDir != "" {
			logs = "  (logs: " + f.LogDir + ")"
		}
		fmt.Fprintf(w, "    replay:   %s%s\n", replay(f.Step.Num), logs)
	}
}

// changelog is CONTRACT.md's newest changelog section, read once.
var changelog = sync.OnceValues(func() (string, map[string]string) { return clauses.Changelog(snacklab.Contract) })

// Changed says, for the clauses a failed check judges, how the newest
// version of the contract changed them: "changed in version 2: " and the
// changelog's line, once per line. A learner who wrote to the previous
// text then sees the failure is the new rule, not a misreading. Clauses
// the changelog does not cite: none.
func Changed(ids []string) []string {
	version, lines := changelog()
	var out []string
	for _, id := range ids {
		if l, ok := lines[id]; ok {
			if l = "changed in version " + version + ": " + l; !slices.Contains(out, l) {
				out = append(out, l)
			}
		}
	}
	return out
}

func keys(m map[string]bool) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// stepOf is the step of a key: 6 for "6.c".
func stepOf(k string) int {
	n := 0
	fmt.Sscanf(k, "%d", &n)
	return n
}

// compactParts lists keys by step: "1 b c d · 2 a b · 4".
func compactParts(ks []string) string {
	var out []string
	last := ""
	for _, k := range ks {
		step, part, _ := strings.Cut(k, ".")
		if step != last {
			out = append(out, step)
			last = step
		}
		if part != "" {
			out[len(out)-1] += " " + part
		}
	}
	return strings.Join(out, " · ")
}
