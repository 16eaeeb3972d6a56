package cliflag_test

import (
	"errors"
	"flag"
	"io"
	"strconv"
	"testing"

	"snacklab/internal/cliflag"
)

func TestParseInt(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    int64
		wantErr bool
	}{
		{"0", 0, false}, {"7", 7, false}, {"-7", -7, false}, {"1000000", 1000000, false},
		{"9223372036854775807", 9223372036854775807, false}, {"-9223372036854775808", -9223372036854775808, false},
		{"010", 0, true}, {"0x10", 0, true}, {"0b11", 0, true}, {"0o7", 0, true}, {"1_000", 0, true},
		{"+7", 0, true}, {" 7", 0, true}, {"7 ", 0, true}, {"-0", 0, true}, {"", 0, true}, {"-", 0, true},
		{"1e3", 0, true}, {"٣", 0, true}, {"--1", 0, true},
	} {
		got, err := cliflag.ParseInt(tc.in)
		if (err != nil) != tc.wantErr || (err == nil && got != tc.want) {
			t.Errorf("ParseInt(%q) = %d, %v; want %d, error %v", tc.in, got, err, tc.want, tc.wantErr)
		}
	}
	if _, err := cliflag.ParseInt("9223372036854775808"); !errors.Is(err, strconv.ErrRange) {
		t.Errorf("ParseInt(2^63) = %v, want a range error (well-formed, too large)", err)
	}
}

func TestIntFlagRange(t *testing.T) {
	for _, tc := range []struct {
		args      []string
		parseErr  bool // malformed: a usage error
		rangeErr  bool // well-formed, outside 1..10: an invalid value
		want      int64
		wantGiven bool
	}{
		{nil, false, false, 5, false},
		{[]string{"-n", "10"}, false, false, 10, true},
		{[]string{"-n", "11"}, false, true, 11, true},
		{[]string{"-n", "0"}, false, true, 0, true},
		{[]string{"-n", "99999999999999999999"}, false, true, 0, true},
		{[]string{"-n", "0x1"}, true, false, 0, false},
	} {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		n := cliflag.NewInt(fs, "n", 5, 1, 10, "a number")
		err := fs.Parse(tc.args)
		if (err != nil) != tc.parseErr {
			t.Errorf("%v: Parse = %v, want error %v", tc.args, err, tc.parseErr)
			continue
		}
		if err != nil {
			continue
		}
		cerr := cliflag.Check(fs)
		if (cerr != nil) != tc.rangeErr || (cerr != nil && !errors.Is(cerr, cliflag.ErrRange)) {
			t.Errorf("%v: Check = %v, want range error %v", tc.args, cerr, tc.rangeErr)
		}
		if !tc.rangeErr && n.Get() != tc.want {
			t.Errorf("%v: Get = %d, want %d", tc.args, n.Get(), tc.want)
		}
		if n.Given() != tc.wantGiven {
			t.Errorf("%v: Given = %v, want %v", tc.args, n.Given(), tc.wantGiven)
		}
	}
}

func TestCheckRate(t *testing.T) {
	for _, tc := range []struct {
		in string
		ok bool
	}{
		{"5/s", true}, {"0.5/s", true}, {"30/m", true}, {"30/min", true}, {"1/h", true}, {"600/h", true},
		{"1e-300/s", false}, {"0.0001/s", false}, {"0/s", false}, {"0x1p4/s", false}, {"+5/s", false},
		{"1_0/s", false}, {"5", false}, {"5/d", false}, {"05/s", false}, {"5./s", false}, {".5/s", false},
		{"1e3/s", false}, {"Inf/s", false}, {"NaN/s", false},
	} {
		if err := cliflag.CheckRate(tc.in); (err == nil) != tc.ok {
			t.Errorf("CheckRate(%q) = %v, want ok %v", tc.in, err, tc.ok)
		}
	}
}

// FuzzParseInt: whatever it accepts is the canonical decimal form of its
// value, so no spelling but one reaches a program; and every int64's
// canonical form is accepted.
func FuzzParseInt(f *testing.F) {
	for _, s := range []string{"0", "7", "-7", "010", "0x10", "0b11", "1_000", "+7", " 7", "-0", "9223372036854775808", "1e3"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := cliflag.ParseInt(s)
		if err == nil && strconv.FormatInt(v, 10) != s {
			t.Fatalf("ParseInt(%q) = %d, whose decimal form is %q: a non-canonical spelling was accepted", s, v, strconv.FormatInt(v, 10))
		}
		if err == nil {
			return
		}
		if n, perr := strconv.ParseInt(s, 10, 64); perr == nil && strconv.FormatInt(n, 10) == s {
			t.Fatalf("ParseInt(%q) refused the canonical form of %d: %v", s, n, err)
		}
	})
}

// FuzzFlagSet parses "-n VALUE" through a FlagSet as the programs do: it
// never panics, and a value it accepts within the range is canonical.
func FuzzFlagSet(f *testing.F) {
	for _, s := range []string{"5", "010", "0x10", "-1", "99999999999999999999", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		n := cliflag.NewInt(fs, "n", 1, 0, 1000, "n")
		if fs.Parse([]string{"-n", s}) != nil {
			return
		}
		if cliflag.Check(fs) != nil {
			return
		}
		if got := strconv.FormatInt(n.Get(), 10); got != s {
			t.Fatalf("-n %q gave %s", s, got)
		}
	})
}
