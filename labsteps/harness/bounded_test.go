package harness_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"snacklab/labsteps/harness"
	"snacklab/labsteps/result"
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
		{"plain", "a\nb\r\nc", 10, 1000, []string{"a", "b", "c"}, false, false},
		{"empty lines kept", "\n\nx\n", 10, 1000, []string{"", "", "x"}, false, false},
		{"long line cut", "0123456789abc\nnext\n", 10, 1000, []string{"0123456789 … (cut at 10 bytes)", "next"}, true, false},
		{"flood stops at the total", "aaaa\nbbbb\ncccc\ndddd\n", 10, 130, []string{"aaaa", "bbbb"}, false, true},
		{"empty lines count too", strings.Repeat("\n", 1000), 10, 640, make([]string, 10), false, true},
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

// A real program that prints a 6 MiB line, then floods stdout and stderr:
// the judge keeps the line cut at MaxLine, stops keeping stdout at
// MaxStdout, still sees the exit, and quotes at most MaxObserved bytes of
// it in a check.
func TestProcOutputBounded(t *testing.T) {
	bin := t.TempDir()
	script := "#!/bin/sh\nhead -c 6291456 /dev/zero | tr '\\0' x; echo\necho after\n" +
		"head -c 10485760 /dev/zero | tr '\\0' '\\n'\nhead -c 3145728 /dev/zero >&2\nexit 3\n"
	if err := os.WriteFile(filepath.Join(bin, "queuectl"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	l := result.Limits{Wait: time.Minute, Block: time.Minute, Drain: time.Minute, Step: 5 * time.Minute}
	h := harness.New(context.Background(), t.TempDir(), bin, l)
	var lines []harness.Line
	var observed string
	code := -1
	problem := h.Do(func(h *harness.Harness) {
		p := h.Start("Q", result.LaneHarness, "queuectl", result.NoClock, nil)
		code, _ = p.Wait("the flood ends")
		lines, observed = p.Lines(), p.Observed()
	})
	if problem != "" {
		t.Fatalf("Do: problem %q", problem)
	}
	if code != 3 {
		t.Errorf("exit: got %d; want 3 (the exit seen past the flood)", code)
	}
	if len(lines) < 2 {
		t.Fatalf("lines: got %d (exit %d); want the cut line and more. Observed: %.300q", len(lines), code, observed)
	}
	if lines[0].Text != strings.Repeat("x", harness.MaxLine)+" … (cut at 1048576 bytes)" || lines[1].Text != "after" {
		t.Errorf("lines: got %d, the first %d bytes; want the 6 MiB line cut at %d and then \"after\"", len(lines), len(lines[0].Text), harness.MaxLine)
	}
	total := 0
	for _, l := range lines {
		total += len(l.Text) + 1
	}
	if total > harness.MaxStdout+harness.MaxLine+100 || len(lines) > harness.MaxStdout/64+1 {
		t.Errorf("kept stdout: got %d bytes in %d lines; want at most about %d bytes, a line costing 64 at least", total, len(lines), harness.MaxStdout)
	}
	if len(observed) > harness.MaxObserved+500 || !strings.Contains(observed, "(cut at 4000 bytes)") || !strings.Contains(observed, "stdout cut at") {
		t.Errorf("Observed: got %d bytes %.200q…; want at most about %d, saying where it was cut", len(observed), observed, harness.MaxObserved)
	}
}
