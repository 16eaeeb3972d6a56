package result

import "strings"

// PartID is the short id of a part: the letter before ": " in its name
// ("c" for "c: redirects are never followed"), else the i-th letter (steps
// that name their parts without letters); "" for "" (no part) or when the
// name has no letter and i < 0.
func PartID(name string, i int) string {
	if name == "" {
		return ""
	}
	if id, _, ok := strings.Cut(name, ": "); ok && id != "" && len(id) <= 2 && strings.Trim(id, "abcdefghijklmnopqrstuvwxyz") == "" {
		return id
	}
	if i < 0 {
		return ""
	}
	return letters(i)
}

// letters is a, b, …, z, aa, ab, …
func letters(i int) string {
	if i < 26 {
		return string(rune('a' + i))
	}
	return letters(i/26-1) + string(rune('a'+i%26))
}

// PartOutcome is how one part of a step did: the unit a step's points are
// split into.
type PartOutcome struct {
	ID       string  // "c"; "" for a step without parts
	Name     string  // "c: redirects are never followed"; "" for a step without parts
	Pass     bool    // no failed check in the part, nor before or after the parts, and no problem
	TimedOut bool    // a failure of the part was a wait running out
	Checks   int     // checks made in the part
	Failures []Check // the part's failed checks, then those of the step outside any part
	// Verdict is PASS, FAIL (some failure was a wrong answer), or why the
	// part was not judged: TIMEOUT (every failure was a wait running out),
	// or the step's NotJudged when it failed without a wrong answer.
	Verdict Verdict
}

// PartOutcomes says how each part of the step did, in the order the step
// declared them. A step that ran no parts (step 4, or a step that failed
// before its parts began) is one outcome with no id. A failure outside the
// parts (a missing tool before them, a check after them) or a problem of
// the harness fails every part: they were not all seen to pass.
func (r Result) PartOutcomes() []PartOutcome {
	if len(r.Parts) == 0 {
		p := PartOutcome{Pass: r.Pass, TimedOut: r.TimedOut, Checks: len(r.Checks), Failures: r.Failures(), Verdict: r.Verdict()}
		return []PartOutcome{p}
	}
	var outside []Check
	for _, c := range r.Checks {
		if !c.OK && !r.hasPart(c.Part) {
			outside = append(outside, c)
		}
	}
	out := make([]PartOutcome, len(r.Parts))
	for i, name := range r.Parts {
		p := PartOutcome{ID: PartID(name, i), Name: name}
		for _, c := range r.Checks {
			if c.Part != name {
				continue
			}
			p.Checks++
			if !c.OK {
				p.Failures = append(p.Failures, c)
				p.TimedOut = p.TimedOut || c.TimedOut
			}
		}
		p.Failures = append(p.Failures, outside...)
		for _, c := range outside {
			p.TimedOut = p.TimedOut || c.TimedOut
		}
		// A failed step with no failed check says nowhere where it went
		// wrong: no part was seen to pass.
		p.Pass = len(p.Failures) == 0 && r.Problem == "" && (r.Pass || r.Failed() != nil)
		p.Verdict = partVerdict(p, r)
		out[i] = p
	}
	return out
}

// partVerdict is p's verdict in r: a wrong answer judges it FAIL; failures
// that were all waits running out leave it not judged (TIMEOUT), as does a
// step the lab could not judge; a step that failed with a problem of the
// implementation's own (its programs missing) judges it FAIL.
func partVerdict(p PartOutcome, r Result) Verdict {
	if p.Pass {
		return Pass
	}
	for _, c := range p.Failures {
		if !c.TimedOut {
			return Fail
		}
	}
	switch {
	case len(p.Failures) > 0:
		return Timeout
	case r.NotJudged != "":
		return r.NotJudged
	case r.TimedOut:
		return Timeout
	}
	return Fail
}

func (r Result) hasPart(name string) bool {
	for _, p := range r.Parts {
		if p == name {
			return true
		}
	}
	return false
}

// FailedParts lists the ids of the parts that failed ("c", "h").
func (r Result) FailedParts() []string {
	var out []string
	for _, p := range r.PartOutcomes() {
		if !p.Pass && p.ID != "" {
			out = append(out, p.ID)
		}
	}
	return out
}

// Retryable says some part of the step was not judged and running the step
// again, alone, may judge it: the lab erred, or a wait ran out on a machine
// loaded enough that the step's limits were scaled up for it. A wait that
// ran out on a quiet machine, with the limits it gives, is a program that
// does not end: running it again would only cost its limit twice more.
// `lab grade --retries` and the selftest retry exactly these steps.
func (r Result) Retryable() bool {
	for _, p := range r.PartOutcomes() {
		if !p.Pass && !p.Verdict.Judged() && (p.Verdict != Timeout || r.Limits.Scale > 1) {
			return true
		}
	}
	return false
}
