package rules

import (
	"encoding/json"
	"fmt"
	"math/big"
	"strconv"
	"strings"
)

// Outcome is what a rule says of a value.
type Outcome int

const (
	// Accepted: the value passes; the program goes on to its work.
	Accepted Outcome = iota
	// Malformed: not a plain decimal integer (§1.int.plain): a usage
	// error, exit 2, on a command line.
	Malformed
	// Invalid: well formed, outside the rule (§1.invalid, §1.int.range):
	// exit 3 on a command line, 400 in a body.
	Invalid
)

// String is the outcome as a message names it.
func (o Outcome) String() string {
	return [...]string{"accepted", "malformed", "invalid"}[o]
}

// Case is one value derived from a rule and what the rule says of it.
type Case struct {
	Name  string // which case: "min−1", "byte 1 '-'", "leading zero"
	Value string // the value as given: a command-line argument, or raw JSON (JSONCases)
	Want  Outcome
	// Clause is the clause beyond the rule's own that decides this case
	// (§1.int.plain for a spelling, §1.int.range for a number out of
	// range), or "".
	Clause string
}

// Clauses are the clauses that decide c under rule r.
func (c Case) Clauses(r Rule) []string {
	out := []string{r.Clause}
	if c.Clause != "" {
		out = append(out, c.Clause)
	}
	return out
}

// Cases derives the command-line cases of r: every boundary of a range and
// one past it, other spellings of a number, lengths 0, 1, max and max+1 of a
// pattern, every character class at its first and at a later position, and
// each word exactly and not quite.
func (r Rule) Cases() []Case {
	switch {
	case r.Int != nil:
		return r.Int.cases()
	case r.Pattern != nil:
		return r.Pattern.cases()
	default:
		return wordCases(r.Words, func(s string) string { return s })
	}
}

// Ends is a smaller set for an input whose program another input tries with
// every case of the rule: a range's ends and one past them; a pattern's
// lengths 0, max and max+1, a first byte only a later position allows, and
// a later byte outside the pattern, non-ASCII and a control byte; every word.
func (r Rule) Ends() []Case {
	switch {
	case r.Int != nil:
		return r.Int.bounds()
	case r.Pattern != nil:
		return r.Pattern.ends()
	default:
		return r.Cases()
	}
}

// JSONCases derives the cases of r as a member of a JSON body: Value is raw
// JSON. A number of another JSON type (a string "7", a fraction) or a string
// rule given a number is invalid; the spellings of §1.int.plain are a
// command line's, not JSON's, and are not tried.
func (r Rule) JSONCases() []Case {
	var out []Case
	switch {
	case r.Int != nil:
		out = r.Int.bounds()
		out = append(out,
			Case{Name: "beyond 64 bits", Value: "18446744073709551616", Want: Invalid},
			Case{Name: "a string", Value: strconv.Quote(strconv.FormatInt(r.Int.Min, 10)), Want: Invalid},
			Case{Name: "a fraction", Value: strconv.FormatInt(r.Int.Min, 10) + ".5", Want: Invalid},
			Case{Name: "a boolean", Value: "true", Want: Invalid})
		for i := range out {
			out[i].Clause = ""
		}
		return out
	case r.Pattern != nil:
		out = r.Pattern.cases()
	default:
		out = wordCases(r.Words, func(s string) string { return s })
	}
	for i := range out {
		out[i].Value = jsonString(out[i].Value)
	}
	return append(out, Case{Name: "a number", Value: "7", Want: Invalid})
}

func jsonString(s string) string {
	b, _ := json.Marshal(s) // a string always marshals
	return string(b)
}

// bounds: each end, and one past it, however large.
func (g *Range) bounds() []Case {
	one := big.NewInt(1)
	below := new(big.Int).Sub(big.NewInt(g.Min), one)
	above := new(big.Int).Add(big.NewInt(g.Max), one)
	return []Case{
		{Name: "min−1", Value: below.String(), Want: Invalid, Clause: "§1.int.range"},
		{Name: "min", Value: strconv.FormatInt(g.Min, 10), Want: Accepted},
		{Name: "max", Value: strconv.FormatInt(g.Max, 10), Want: Accepted},
		{Name: "max+1", Value: above.String(), Want: Invalid, Clause: "§1.int.range"},
	}
}

// cases: the bounds, a number beyond 64 bits, and every spelling §1.int.plain
// calls malformed.
func (g *Range) cases() []Case {
	min := strconv.FormatInt(g.Min, 10)
	zero := "0" + min
	out := append(g.bounds(), Case{Name: "beyond 64 bits", Value: "18446744073709551616", Want: Invalid, Clause: "§1.int.range"})
	for _, s := range []struct{ name, value string }{
		{"leading zero", zero},
		{"leading +", "+" + min},
		{"exponent", "1e3"},
		{"hex", "0x10"},
		{"digit separator", "1_000"},
		{"fraction", min + ".0"},
		{"leading space", " " + min},
		{"trailing space", min + " "},
		{"minus zero", "-0"},
		{"empty", ""},
		{"non-ASCII digit", "\u0661"},
		{"control byte", min + "\x01"},
	} {
		out = append(out, Case{Name: s.name, Value: s.value, Want: Malformed, Clause: "§1.int.plain"})
	}
	return out
}

// ends: the lengths around the bounds, and one refused byte of each kind.
func (p *Pattern) ends() []Case {
	all := p.cases()
	var out []Case
	var restOnly, outside bool
	for _, c := range all {
		switch {
		case strings.HasPrefix(c.Name, "length 0"), strings.Contains(c.Name, "(max"):
		case c.Name == "middle byte "+NonASCII.Name, c.Name == "middle byte "+Control.Name:
		case !restOnly && c.Want == Invalid && strings.HasPrefix(c.Name, "first byte ") && p.restAllows(c.Name[len("first byte "):]):
			restOnly = true
		case !outside && c.Want == Invalid && strings.HasPrefix(c.Name, "middle byte "):
			outside = true
		default:
			continue
		}
		out = append(out, c)
	}
	return out
}

// restAllows reports whether a later position allows the class named name.
func (p *Pattern) restAllows(name string) bool {
	for _, c := range p.Rest {
		if c.Name == name {
			return true
		}
	}
	return false
}

// cases: lengths 0, 1, max and max+1, then the classes at the first byte
// and at a middle byte.
func (p *Pattern) cases() []Case {
	first, rest := p.First[0].Sample, p.Rest[1].Sample
	long := first + strings.Repeat(rest, p.MaxLen-1)
	out := []Case{
		{Name: "length 0", Value: "", Want: Invalid},
		{Name: "length 1", Value: first, Want: Accepted},
		{Name: fmt.Sprintf("length %d (max)", p.MaxLen), Value: long, Want: Accepted},
		{Name: fmt.Sprintf("length %d (max+1)", p.MaxLen+1), Value: long + rest, Want: Invalid},
	}
	// At the first byte: each class it allows, each class only a later
	// byte allows, and one class refused everywhere (the others are tried
	// at a later byte).
	outside := false
	for _, c := range AllClasses {
		if !allows(p.First, c) && !allows(p.Rest, c) {
			if outside {
				continue
			}
			outside = true
		}
		out = append(out, Case{Name: "first byte " + c.Name, Value: c.Sample + rest, Want: verdict(allows(p.First, c))})
	}
	// Every class a later position allows, in one value; each refused one
	// alone, so that a refusal names its class.
	every := first
	for _, c := range p.Rest {
		every += c.Sample
	}
	out = append(out, Case{Name: "every class allowed after the first", Value: every, Want: Accepted})
	for _, c := range AllClasses {
		if !allows(p.Rest, c) {
			out = append(out, Case{Name: "middle byte " + c.Name, Value: first + c.Sample + rest, Want: Invalid})
		}
	}
	return out
}

func verdict(ok bool) Outcome {
	if ok {
		return Accepted
	}
	return Invalid
}

// wordCases: each word, then each word in capitals, with a trailing space,
// and the empty word, each refused unless it is one of the words.
func wordCases(words []string, quote func(string) string) []Case {
	var out []Case
	is := map[string]bool{}
	for _, w := range words {
		is[w] = true
		out = append(out, Case{Name: fmt.Sprintf("%q", w), Value: quote(w), Want: Accepted})
	}
	var refused []string
	for _, w := range words {
		if u := strings.ToUpper(w); u != w {
			refused = append(refused, u)
		}
	}
	refused = append(refused, words[0]+" ", "")
	for _, w := range refused {
		if is[w] {
			continue
		}
		out = append(out, Case{Name: fmt.Sprintf("%q", w), Value: quote(w), Want: Invalid})
	}
	return out
}
