package model_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"snacklab/internal/testbin"
	"snacklab/labsteps/model"
)

// The reference's queuectl, built once for every test (internal/testbin).
func TestMain(m *testing.M) { testbin.Main(m, "queuectl") }

// TestModelReferencePasses: the reference answers as the model says on a
// few seeds; a mismatch here is a bug of the model or of the reference, and
// the report says which clause to read.
func TestModelReferencePasses(t *testing.T) {
	r := &model.Runner{Queuectl: testbin.Path("queuectl"), Dir: t.TempDir()}
	for seed := uint64(1); seed <= 3; seed++ {
		m, err := model.Seed(context.Background(), r, seed, 40, 200)
		if err != nil {
			t.Fatal(err)
		}
		if m != nil {
			t.Fatalf("reference departs from the model:\n%s", m.Report(seed))
		}
	}
}

// wrongQueue writes a shell wrapper around the reference that corrupts one
// answer class, the way a learner's bug would.
func wrongQueue(t *testing.T, script string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "queuectl")
	body := "#!/bin/sh\nREAL=" + testbin.Path("queuectl") + "\n" + script
	if err := os.WriteFile(p, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestModelCatchesAndShrinks: each wrong queue is caught on the first seed
// that reaches its class, and shrunk to a few commands naming the operation.
func TestModelCatchesAndShrinks(t *testing.T) {
	for _, tc := range []struct {
		name, verb, script string
	}{
		// finish with a stale (or unknown) token claims success.
		{"stale finish exits 0", "finish", `"$REAL" "$@"; rc=$?
[ "$1" = finish ] && [ $rc = 12 ] && exit 0
exit $rc
`},
		// claim reads the clock 1 ms late: a job due one ms from now, or a
		// lease that ends one ms from now, is handed out early.
		{"claim one ms early", "claim", `if [ "$1" = claim ]; then
  out=; for a in "$@"; do
    if [ "$prev" = --now-ms ]; then a=$((a+1)); fi
    out="$out $a"; prev=$a
  done
  exec "$REAL" $out
fi
exec "$REAL" "$@"
`},
		// finish reads the clock 1 ms late: updated_at, a retry's
		// available_at or its deadline verdict is off.
		{"finish one ms late", "finish", `if [ "$1" = finish ]; then
  out=; for a in "$@"; do
    if [ "$prev" = --now-ms ]; then a=$((a+1)); fi
    out="$out $a"; prev=$a
  done
  exec "$REAL" $out
fi
exec "$REAL" "$@"
`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &model.Runner{Queuectl: wrongQueue(t, tc.script), Dir: t.TempDir()}
			for seed := uint64(1); seed <= 5; seed++ {
				m, err := model.Seed(context.Background(), r, seed, 30, 200)
				if err != nil {
					t.Fatal(err)
				}
				if m == nil {
					continue
				}
				rep := m.Report(seed)
				t.Logf("%s", rep)
				if len(m.Ops) > 4 {
					t.Errorf("shrunk to %d ops, want at most 4:\n%s", len(m.Ops), rep)
				}
				if got := m.Ops[m.Step].Verb; got != tc.verb {
					t.Errorf("failing operation %s, want %s", got, tc.verb)
				}
				if !strings.Contains(rep, "operation: "+tc.verb) || !strings.Contains(rep, "clause:    §") {
					t.Errorf("report does not name the operation and clause:\n%s", rep)
				}
				return
			}
			t.Fatal("no seed caught the wrong queue")
		})
	}
}

// TestModelBackoff: the model's backoff is the formula of
// §2.backoff.formula, and so is `queuectl backoff` of the reference.
func TestModelBackoff(t *testing.T) {
	for _, id := range []string{"o-1", "a", "x.9"} {
		for _, n := range []int64{1, 2, 6, 7, 1000} {
			out, err := exec.Command(testbin.Path("queuectl"), "backoff", "--id", id, "--attempt", strconv.FormatInt(n, 10), "--json").Output()
			if err != nil {
				t.Fatalf("queuectl backoff %s %d: %v", id, n, err)
			}
			var v struct {
				Delay int64 `json:"delay_ms"`
			}
			if err := json.Unmarshal(out, &v); err != nil {
				t.Fatalf("queuectl backoff: %v: %q", err, out)
			}
			if got := model.Backoff(id, n); got != v.Delay {
				t.Errorf("Backoff(%q, %d) = %d, queuectl says %d", id, n, got, v.Delay)
			}
		}
	}
}

// TestModelDiffFreedoms: what the contract leaves free is not a mismatch:
// a number's spelling, members the contract does not name, the order of a
// job's redrives; what it pins is.
func TestModelDiffFreedoms(t *testing.T) {
	exp := model.Expect{JSON: map[string]any{"n": int64(5), "rs": []any{int64(1), int64(2)}}, EitherOrder: []string{"rs"}}
	for _, tc := range []struct {
		stdout string
		ok     bool
	}{
		{`{"n":5,"rs":[1,2]}` + "\n", true},
		{`{"n":5.0,"rs":[2,1],"extra":true}` + "\n", true},
		{`{"n":6,"rs":[1,2]}`, false},
		{`{"n":5,"rs":[1]}`, false},
		{`{"n":5,"rs":[1,2]}{}`, false},
		{`{"rs":[1,2]}`, false},
	} {
		if d := model.Diff(exp, model.Observed{Stdout: tc.stdout}); (d == "") != tc.ok {
			t.Errorf("Diff(%s) = %q, want ok=%v", tc.stdout, d, tc.ok)
		}
	}
	if d := model.Diff(model.Expect{Exit: 9}, model.Observed{Exit: 9, Stdout: "{}"}); d == "" {
		t.Error("a refusal that prints on stdout passed (§3.stdout.refusal)")
	}
}
