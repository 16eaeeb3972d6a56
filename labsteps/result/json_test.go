package result_test

import (
	"bytes"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"snacklab/labsteps/result"
)

// What Encode writes, Decode reads back unchanged: every field a report or
// a grader uses crosses a process boundary (a worker, a container) intact.
func TestJSONRoundTrip(t *testing.T) {
	in := []result.Result{
		{Step: result.Step{Num: 1, Slug: "retry", Title: "Retry", Checks: "backoff", Why: "poison orders"},
			Pass: true, Took: 210 * time.Millisecond, Procs: 12, Commits: 30, Waits: time.Second,
			Checks: []result.Check{{What: "backoff(o-1, 1)", Expected: "1000", Observed: "1000", Why: "the formula", OK: true,
				At: 3 * time.Millisecond, Clause: []string{"§1.backoff.formula"}}},
			Events: []result.Event{{At: time.Millisecond, Lane: result.LaneQueuectl, Kind: "action", Text: "init",
				Clock: result.NoClock, Section: "a"}},
			Narrative: "step 1: Retry\n",
			Limits: result.Limits{Wait: 10 * time.Second, Step: time.Minute, Scale: 1.5,
				From: result.Calibration{Start: 3 * time.Millisecond, Cores: 2, Samples: 3}}},
		{Step: result.Step{Num: 8, Slug: "crash"}, TimedOut: true, Problem: "time limit of 1m0s reached",
			Dir: "/tmp/x", LogDir: "/tmp/x/logs",
			Checks: []result.Check{{What: "B reclaims", TimedOut: true}}},
	}
	var b bytes.Buffer
	if err := result.Encode(&b, in); err != nil {
		t.Fatal(err)
	}
	out, err := result.Decode(&b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(out, in) {
		t.Errorf("Decode(Encode(x)) = %+v, want %+v", out, in)
	}
}

// A document that is not this format is refused, naming what is wrong.
func TestDecodeRefuses(t *testing.T) {
	head := fmt.Sprintf(`{"format":%q,"contract":%d,`, result.Format, result.ContractVersion)
	for _, tc := range []struct{ name, doc, says string }{
		{"another format", `{"format":"snacklab-results/0","results":[]}`, `format "snacklab-results/0"`},
		{"another contract", head[:strings.Index(head, `"contract"`)] + `"contract":99,"results":[]}`, "version 99"},
		{"no format", `{"results":[]}`, `format ""`},
		{"an unknown field", head + `"results":[{"step":{"num":1},"verdict":"PASS"}]}`, `unknown field "verdict"`},
		{"two documents", head + `"results":[]} {}`, "more than one"},
		{"not JSON", `PASS 1 retry`, "decode results"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := result.Decode(strings.NewReader(tc.doc))
			if err == nil || !strings.Contains(err.Error(), tc.says) {
				t.Errorf("Decode(%s) error = %v, want one saying %q", tc.doc, err, tc.says)
			}
		})
	}
}

// A failure's ✗ line leads with its plain cause: the part, what was
// checked, and what the program said on stderr when the observation is too
// long to show it.
func TestCauseLeadsWithWhatTheProgramSaid(t *testing.T) {
	long := "ended (exit 1) without a refused write-lock attempt; 0 lock calls on queue.db in its trace /tmp/x/trace; " +
		strings.Repeat("no output; ", 12) + "then exit 1 (stderr: not implemented; all of it in /tmp/x/logs/03-enqueue.stderr)"
	for _, tc := range []struct {
		name string
		c    result.Check
		want string
	}{
		{"short", result.Check{What: "init", Expected: "exit 0", Observed: "exit 1 (stderr: not implemented)"},
			"init: expected exit 0, observed exit 1 (stderr: not implemented)"},
		{"long, in a part", result.Check{What: "enqueue tries the lock", Expected: "fcntl F_SETLK F_WRLCK → EAGAIN", Observed: long, Part: "a: the lock"},
			`[a] enqueue tries the lock: it said "not implemented" — expected fcntl F_SETLK F_WRLCK → EAGAIN, observed ended (exit 1)`},
		{"only the log's path", result.Check{What: "x", Expected: "1", Observed: strings.Repeat("y", 170) + " (stderr: /tmp/l/01-x.stderr)"},
			"x: expected 1, observed yyy"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.c.Cause(); !strings.HasPrefix(got, tc.want) {
				t.Errorf("Cause() = %q, want it to start %q", got, tc.want)
			}
		})
	}
}
