// Package rules is CONTRACT.md's value rules as data: each rule of §1 and
// every flag range of §3–§5, once, as an integer range, a pattern or a set of
// words, with the clause that states it. The lab derives its generated cases
// from these values (Cases, JSONCases) and tries them on every input that
// takes the rule (Inputs), so a rule judged by one check is judged the same
// way everywhere it applies, and a check's prose comes from the rule it
// judges, not from a second copy of it.
package rules

import (
	"fmt"
	"strings"
)

// Rule is one value rule of the contract. Exactly one of Int, Pattern and
// Words is set.
type Rule struct {
	Clause  string   // the clause that states it: "§1.qty"
	Name    string   // what the value is, for messages: "qty"
	Int     *Range   // an integer range, plain decimal on a command line (§1.int.plain)
	Pattern *Pattern // bytes matching a pattern
	Words   []string // one of these words, exactly (case matters)
}

// Range is an integer range, both ends included.
type Range struct{ Min, Max int64 }

// Pattern is a string of at most MaxLen bytes (at least one) whose first
// byte is of a class in First and every other byte of a class in Rest.
type Pattern struct {
	First, Rest []Class
	MaxLen      int
}

// Class is a character class of a pattern, with one byte (or, for the classes
// outside ASCII, one character) that stands for it in the cases.
type Class struct {
	Name   string // "A-Z", "." …
	Sample string
}

// The classes the patterns are made of, and those they refuse: every byte a
// learner's check could let through by mistake is in one of them.
var (
	Upper    = Class{"A-Z", "Q"}
	Lower    = Class{"a-z", "q"}
	Digit    = Class{"0-9", "7"}
	Dot      = Class{"'.'", "."}
	Under    = Class{"'_'", "_"}
	Colon    = Class{"':'", ":"}
	Dash     = Class{"'-'", "-"}
	Slash    = Class{"'/'", "/"}
	Hash     = Class{"'#'", "#"}
	Space    = Class{"space", " "}
	At       = Class{"'@'", "@"}
	NonASCII = Class{"non-ASCII", "é"}
	Control  = Class{"control byte", "\x01"}
	Del      = Class{"DEL", "\x7f"}

	// AllClasses is every class a case tries at every position.
	AllClasses = []Class{Upper, Lower, Digit, Dot, Under, Colon, Dash, Slash, Hash, Space, At, NonASCII, Control, Del}
)

// The value rules of CONTRACT §1.
var (
	ID = Rule{Clause: "§1.id", Name: "order id", Pattern: &Pattern{
		First: []Class{Upper, Lower, Digit}, Rest: []Class{Upper, Lower, Digit, Dot, Under, Colon, Dash}, MaxLen: 64}}
	Qty            = Rule{Clause: "§1.qty", Name: "qty", Int: &Range{1, 1_000_000}}
	MaxAttempts    = Rule{Clause: "§1.max-attempts", Name: "max attempts", Int: &Range{1, 1000}}
	DeadlineWindow = Rule{Clause: "§1.deadline-window", Name: "deadline window", Int: &Range{1, 31_536_000_000}}
	Lease          = Rule{Clause: "§1.lease", Name: "lease", Int: &Range{1, 86_400_000}}
	Owner          = Rule{Clause: "§1.owner", Name: "owner", Pattern: ID.Pattern}
	Note           = Rule{Clause: "§1.note", Name: "note", Pattern: &Pattern{
		First: []Class{Upper, Lower, Digit}, Rest: []Class{Upper, Lower, Digit, Dot, Under, Colon, Slash, Hash, Dash}, MaxLen: 64}}
	OutcomeRule = Rule{Clause: "§1.outcome", Name: "outcome", Words: []string{"ok", "retry", "permanent"}}
	Now         = Rule{Clause: "§1.now", Name: "now", Int: &Range{0, 1<<53 - 1}}
	Token       = Rule{Clause: "§1.token", Name: "token", Int: &Range{0, 1<<63 - 1}}
)

// The flag ranges of §3–§5 that are not a value of §1.
var (
	QueuectlBusy   = Rule{Clause: "§3.flags", Name: "queuectl --busy-timeout-ms", Int: &Range{0, 86_400_000}}
	BackoffAttempt = Rule{Clause: "§3.backoff.flags", Name: "backoff --attempt", Int: &Range{1, 1000}}
	CheckMax       = Rule{Clause: "§3.check.report", Name: "check --max", Int: &Range{1, 10_000}}
	SenderTimeout  = Rule{Clause: "§4.flags", Name: "sender --timeout-ms", Int: &Range{1, 86_400_000}}
	SenderBusy     = Rule{Clause: "§4.flags", Name: "sender --busy-timeout-ms", Int: &Range{0, 86_400_000}}
	ExitAfter      = Rule{Clause: "§4.flags", Name: "sender --exit-after-receipt", Int: &Range{1, 125}}
	FaultCount     = Rule{Clause: "§5.flags", Name: "a fault count (fail_next, hold_next)", Int: &Range{0, 1_000_000}}
	ReceiverBusy   = Rule{Clause: "§5.flags", Name: "receiver --busy-timeout-ms", Int: &Range{1, 86_400_000}}
	Port           = Rule{Clause: "§5.flags", Name: "the port of --addr", Int: &Range{0, 65535}}
	// LooseAckFlag takes "" too: the value that means "off", as POST
	// /faults names it; the contract's `--loose-ack 1|ok` does not say a
	// receiver must refuse it.
	LooseAckFlag = Rule{Clause: "§5.flags", Name: "receiver --loose-ack", Words: []string{"1", "ok", ""}}
	LooseAckBody = Rule{Clause: "§5.faults.post", Name: "loose_ack", Words: []string{"1", "ok", ""}}
)

// Text is the rule as a sentence, for a check's expected value and why.
func (r Rule) Text() string {
	switch {
	case r.Int != nil:
		return fmt.Sprintf("%s is an integer %d … %d (%s)", r.Name, r.Int.Min, r.Int.Max, r.Clause)
	case r.Pattern != nil:
		return fmt.Sprintf("%s is 1–%d bytes, the first one of %s, every other one of %s (%s)",
			r.Name, r.Pattern.MaxLen, classNames(r.Pattern.First), classNames(r.Pattern.Rest), r.Clause)
	default:
		q := make([]string, len(r.Words))
		for i, w := range r.Words {
			q[i] = fmt.Sprintf("%q", w)
		}
		return fmt.Sprintf("%s is one of %s, exactly (%s)", r.Name, strings.Join(q, ", "), r.Clause)
	}
}

func classNames(cs []Class) string {
	n := make([]string, len(cs))
	for i, c := range cs {
		n[i] = c.Name
	}
	return strings.Join(n, " ")
}

// allows reports whether class c is one of cs.
func allows(cs []Class, c Class) bool {
	for _, x := range cs {
		if x == c {
			return true
		}
	}
	return false
}
