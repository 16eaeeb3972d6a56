package rules_test

import (
	"fmt"
	"math/big"
	"regexp"
	"slices"
	"testing"

	"snacklab/labsteps/rules"
)

// The patterns as CONTRACT §1 writes them: an oracle the derived cases are
// held to, written apart from the classes they are derived from.
var contractPatterns = map[string]*regexp.Regexp{
	"§1.id":    regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:-]{0,63}$`),
	"§1.owner": regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:-]{0,63}$`),
	"§1.note":  regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:/#-]{0,63}$`),
}

// TestCasesAgreeWithTheContract: every derived case's outcome is what the
// contract's own pattern or range says of its value.
func TestCasesAgreeWithTheContract(t *testing.T) {
	for _, in := range rules.Inputs() {
		for _, c := range in.Cases() {
			if in.Body() {
				continue // JSON: TestJSONCases
			}
			r := in.Rule
			var want rules.Outcome
			switch {
			case r.Pattern != nil:
				want = rules.Invalid
				if contractPatterns[r.Clause].MatchString(c.Value) {
					want = rules.Accepted
				}
			case r.Int != nil:
				want = intOutcome(c.Value, r.Int)
			default:
				want = rules.Invalid
				if slices.Contains(r.Words, c.Value) {
					want = rules.Accepted
				}
			}
			if c.Want != want {
				t.Errorf("%s, case %s (%q): Want=%v, want %v", in.Name(), c.Name, c.Value, c.Want, want)
			}
		}
	}
}

// intOutcome is §1.int.plain and §1.int.range, written from the contract.
var plain = regexp.MustCompile(`^(0|-?[1-9][0-9]*)$`)

func intOutcome(s string, g *rules.Range) rules.Outcome {
	if !plain.MatchString(s) {
		return rules.Malformed
	}
	n, _ := new(big.Int).SetString(s, 10)
	if n.Cmp(big.NewInt(g.Min)) < 0 || n.Cmp(big.NewInt(g.Max)) > 0 {
		return rules.Invalid
	}
	return rules.Accepted
}

// TestRangeCases: each end of a range and one past it, however large.
func TestRangeCases(t *testing.T) {
	for _, tt := range []struct {
		rule rules.Rule
		want map[string]string
	}{
		{rules.Qty, map[string]string{"min−1": "0", "min": "1", "max": "1000000", "max+1": "1000001"}},
		{rules.Token, map[string]string{"min−1": "-1", "max": "9223372036854775807", "max+1": "9223372036854775808"}},
		{rules.Now, map[string]string{"max": "9007199254740991", "max+1": "9007199254740992"}},
	} {
		got := map[string]string{}
		for _, c := range tt.rule.Cases() {
			got[c.Name] = c.Value
		}
		for name, want := range tt.want {
			if got[name] != want {
				t.Errorf("%s case %s = %q, want %q", tt.rule.Name, name, got[name], want)
			}
		}
	}
}

// TestPatternCases: every class at the first byte, each refused class at a
// later one, and the lengths around the bound.
func TestPatternCases(t *testing.T) {
	got := map[string]rules.Outcome{}
	for _, c := range rules.ID.Cases() {
		got[c.Name] = c.Want
	}
	for name, want := range map[string]rules.Outcome{
		"length 0": rules.Invalid, "length 1": rules.Accepted, "length 64 (max)": rules.Accepted, "length 65 (max+1)": rules.Invalid,
		"first byte 0-9": rules.Accepted, "first byte '-'": rules.Invalid, "first byte '_'": rules.Invalid,
		"middle byte '/'": rules.Invalid, "middle byte non-ASCII": rules.Invalid, "middle byte DEL": rules.Invalid,
		"every class allowed after the first": rules.Accepted,
	} {
		if g, ok := got[name]; !ok || g != want {
			t.Errorf("ID case %q: got %v (present %t), want %v", name, g, ok, want)
		}
	}
	if _, ok := got["middle byte '-'"]; ok {
		t.Errorf("ID has a refused case for '-' after the first byte, which the pattern allows")
	}
}

// TestJSONCases: a body member's refusals include the other JSON types.
func TestJSONCases(t *testing.T) {
	for _, tt := range []struct {
		rule  rules.Rule
		name  string
		value string
		want  rules.Outcome
	}{
		{rules.Qty, "max+1", "1000001", rules.Invalid},
		{rules.Qty, "a string", `"1"`, rules.Invalid},
		{rules.Qty, "max", "1000000", rules.Accepted},
		{rules.ID, "a number", "7", rules.Invalid},
		{rules.ID, "middle byte control byte", `"Q\u0001q"`, rules.Invalid},
		{rules.LooseAckBody, `""`, `""`, rules.Accepted},
	} {
		var found bool
		for _, c := range tt.rule.JSONCases() {
			if c.Name == tt.name {
				found = true
				if c.Value != tt.value || c.Want != tt.want {
					t.Errorf("%s JSON case %s = %s %v, want %s %v", tt.rule.Name, tt.name, c.Value, c.Want, tt.value, tt.want)
				}
			}
		}
		if !found {
			t.Errorf("%s has no JSON case %s", tt.rule.Name, tt.name)
		}
	}
}

// TestInputs: each program tries each of its rules in full on one input,
// and every input's other flags come in pairs.
func TestInputs(t *testing.T) {
	full := map[string]int{}
	seen := map[string]bool{}
	for _, in := range rules.Inputs() {
		if seen[in.Name()] {
			t.Errorf("input %s listed twice", in.Name())
		}
		seen[in.Name()] = true
		if !in.Body() && len(in.Needs)%2 != 0 {
			t.Errorf("%s: needs %q are not flag/value pairs", in.Name(), in.Needs)
		}
		if len(in.Clauses) == 0 {
			t.Errorf("%s names no clause", in.Name())
		}
		if in.Full {
			full[fmt.Sprintf("%s %s", in.Program, in.Rule.Name)]++
		}
	}
	for _, want := range []string{"queuectl order id", "queuectl qty", "queuectl note", "sender owner", "receiver order id"} {
		if full[want] == 0 {
			t.Errorf("no input of %s is tried in full", want)
		}
	}
}
