// Package cliflag is the one integer flag type of snacklab's programs. The
// standard library's flag.Int accepts whatever strconv.ParseInt(s, 0, 64)
// does, so `--qty 010` meant 8, `--token 0x1` meant 1 and `1_000` and `+7`
// slipped through; an operator's typo must be refused, not reinterpreted.
// An Int accepts plain decimal only and carries its documented range, which
// its help text shows and Check enforces.
package cliflag

import (
	"errors"
	"flag"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// ErrRange marks a well-formed number outside a flag's range: an invalid
// value (exit 3), where a malformed one is a usage error (exit 2).
var ErrRange = errors.New("invalid value")

// errMalformed is what Set reports; the flag package turns it into a parse
// error, which every program answers as a usage error.
var errMalformed = errors.New("want a plain decimal integer (digits, an optional leading -, no leading zeros, prefixes, separators, + or spaces)")

// ParseInt reads s as a plain decimal integer: an optional '-', then digits
// with no leading zero (but "0" itself). A number too large for an int64
// is well-formed: it returns strconv.ErrRange wrapped, so callers can report
// it as out of range rather than malformed.
func ParseInt(s string) (int64, error) {
	digits := strings.TrimPrefix(s, "-")
	if digits == "" || (len(digits) > 1 && digits[0] == '0') || (s[0] == '-' && digits == "0") {
		return 0, errMalformed
	}
	for i := 0; i < len(digits); i++ {
		if digits[i] < '0' || digits[i] > '9' {
			return 0, errMalformed
		}
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return v, fmt.Errorf("%s: %w", s, strconv.ErrRange)
	}
	return v, nil
}

// Int is an integer flag with a range [Lo, Hi].
type Int struct {
	name   string
	v      int64
	raw    string // as given, for messages; "" when not given
	over   bool   // given, well-formed, but beyond int64
	Lo, Hi int64
}

// NewInt defines an Int on fs. The usage text gets the range appended, so
// the help and the contract say the same thing.
func NewInt(fs *flag.FlagSet, name string, def, lo, hi int64, usage string) *Int {
	i := &Int{name: name, v: def, Lo: lo, Hi: hi}
	fs.Var(i, name, fmt.Sprintf("%s; `N` from %d to %d", usage, lo, hi))
	return i
}

// Set implements flag.Value: malformed text is refused here (a usage error).
func (i *Int) Set(s string) error {
	v, err := ParseInt(s)
	switch {
	case errors.Is(err, strconv.ErrRange):
		i.over = true
	case err != nil:
		return err
	}
	i.v, i.raw = v, s
	return nil
}

// String implements flag.Value; it also gives the help its default.
func (i *Int) String() string {
	if i == nil {
		return "0"
	}
	return strconv.FormatInt(i.v, 10)
}

// Get is the value.
func (i *Int) Get() int64 { return i.v }

// Given reports whether the flag was on the command line.
func (i *Int) Given() bool { return i.raw != "" }

// Check reports a value outside [Lo, Hi] as ErrRange.
func (i *Int) Check() error {
	if i.over || i.v < i.Lo || i.v > i.Hi {
		raw := i.raw
		if raw == "" {
			raw = strconv.FormatInt(i.v, 10)
		}
		return fmt.Errorf("%w: --%s %s: want %d to %d", ErrRange, i.name, raw, i.Lo, i.Hi)
	}
	return nil
}

// Check checks the range of every Int given on fs's command line, in the
// order of the flags' names, and returns the first failure; defaults are the
// program's own and may sit outside the range to mean "not given". Call it
// after fs.Parse and before touching any file.
func Check(fs *flag.FlagSet) error {
	var first error
	fs.Visit(func(f *flag.Flag) {
		if i, ok := f.Value.(*Int); ok && first == nil {
			first = i.Check()
		}
	})
	return first
}

// MaxExact is the largest integer every JSON reader holds exactly (2^53-1):
// the upper bound of clock and count flags that have no smaller natural one.
const MaxExact = 1<<53 - 1

// Rate bounds shared by the paced operator verbs.
const (
	MinRatePerSecond = 1.0 / 3600 // 1/h: slower than this is a stalled command, not a pace
)

// CheckRate refuses a rate such as "5/s" whose number is not plain decimal
// ("1e3/s", "0x1p4/s", "+5/s") or which is slower than one per hour, so that
// `--rate 1e-300/s` cannot sleep forever. Units: s, m, min, h.
func CheckRate(s string) error {
	num, unit, ok := strings.Cut(s, "/")
	per := map[string]float64{"s": 1, "m": 60, "min": 60, "h": 3600}[unit]
	whole, frac, _ := strings.Cut(num, ".")
	if !ok || per == 0 || !plainDigits(whole) || (strings.Contains(num, ".") && !allDigits(frac)) {
		return fmt.Errorf("%w: rate %q: want N/s, N/m or N/h with N plain decimal (5/s, 0.5/s, 30/m)", ErrRange, s)
	}
	n, err := strconv.ParseFloat(num, 64)
	if err != nil || math.IsInf(n, 0) || n/per < MinRatePerSecond*(1-1e-9) {
		return fmt.Errorf("%w: rate %q: at least 1/h", ErrRange, s)
	}
	return nil
}

func plainDigits(s string) bool { return allDigits(s) && (len(s) == 1 || s[0] != '0') }

func allDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// decimalInt is an int flag stored in a caller's variable, plain decimal
// only; its range, if any, is the caller's to check.
type decimalInt struct{ p *int }

func (d decimalInt) Set(s string) error {
	v, err := ParseInt(s)
	if err != nil || v != int64(int(v)) {
		return errMalformed
	}
	*d.p = int(v)
	return nil
}

func (d decimalInt) String() string {
	if d.p == nil {
		return "0"
	}
	return strconv.Itoa(*d.p)
}

// IntVar is flag.IntVar, plain decimal only: for programs (the lab) whose
// flags have no contract code for a range and check their bounds themselves.
func IntVar(fs *flag.FlagSet, p *int, name string, def int, usage string) {
	*p = def
	fs.Var(decimalInt{p}, name, usage)
}
