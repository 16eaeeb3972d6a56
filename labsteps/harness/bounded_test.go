package harness_test

import (
	"strings"
	"testing"

	"snacklab/labsteps/harness"
)

// A judged program's stdout is kept line by line within both bounds: a
// 6 MiB line is cut at MaxLine with the mark, a flood stops being kept at
// the total, and everything after is still read (the writer never blocks).
func TestReadLinesBounded(t *testing.T) {
	big := strings.Repeat("x", 6<<20)
	for _, tc := range []struct {
		name                    string
		in                      string
		maxLine, maxTotal       int
		want                    []string
		wantCutLine, wantCutAll bool
	}{
		{"plain", "a\nb\r\nc", 10, 100, []string{"a", "b", "c"}, false, false},
		{"empty lines kept", "\n\nx\n", 10, 100, []string{"", "", "x"}, false, false},
		{"long line cut", "0123456789abc\nnext\n", 10, 100, []string{"0123456789 … (cut at 10 bytes)", "next"}, true, false},
		{"flood stops at the total", "aaaa\nbbbb\ncccc\ndddd\n", 10, 10, []string{"aaaa", "bbbb"}, false, true},
		{"6 MiB line at the real bound", big + "\nafter\n", harness.MaxLine, harness.MaxStdout,
			[]string{big[:harness.MaxLine] + " … (cut at 1048576 bytes)", "after"}, true, false},
	} {
		got, cutLine, cutAll := harness.ReadLines(strings.NewReader(tc.in), tc.maxLine, tc.maxTotal)
		if strings.Join(got, "\n") != strings.Join(tc.want, "\n") || cutLine != tc.wantCutLine || cutAll != tc.wantCutAll {
			t.Errorf("%s: got %d lines %.60q cut line %v stream %v; want %d lines %.60q cut line %v stream %v",
				tc.name, len(got), got, cutLine, cutAll, len(tc.want), tc.want, tc.wantCutLine, tc.wantCutAll)
		}
	}
}

func TestCapWrite(t *testing.T) {
	for _, tc := range []struct {
		name    string
		max     int
		writes  []string
		want    string
		wantCut bool
	}{
		{"under", 10, []string{"abc", "def"}, "abcdef", false},
		{"exactly", 6, []string{"abc", "def"}, "abcdef", false},
		{"over, across writes", 4, []string{"abc", "def", "ghi"}, "abcd … (cut at 4 bytes)\n", true},
	} {
		got, cut := harness.CapWrite(tc.max, tc.writes...)
		if got != tc.want || cut != tc.wantCut {
			t.Errorf("%s: got %q cut %v; want %q cut %v", tc.name, got, cut, tc.want, tc.wantCut)
		}
	}
}

func TestBound(t *testing.T) {
	for _, tc := range []struct {
		in   string
		max  int
		want string
	}{
		{"short", 10, "short"},
		{"0123456789xyz", 10, "0123456789 … (cut at 10 bytes)"},
		{"ééééé", 3, "é … (cut at 3 bytes)"}, // not inside a rune
	} {
		if got := harness.Bound(tc.in, tc.max); got != tc.want {
			t.Errorf("Bound(%q, %d) = %q; want %q", tc.in, tc.max, got, tc.want)
		}
	}
}
