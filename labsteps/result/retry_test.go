package result_test

import (
	"testing"

	"snacklab/labsteps/result"
)

// A step runs again only when running it again may judge it: never for a
// verdict (passed, failed), never for a wait that ran out on a quiet
// machine (a program that does not end), always for the lab's own error
// and for a wait that ran out on a loaded one.
func TestRetryable(t *testing.T) {
	wait := result.Check{What: "the sender's POST arrives", TimedOut: true, Part: "j: a POST"}
	wrong := result.Check{What: "exit 0", Part: "j: a POST"}
	parts := []string{"j: a POST"}
	for _, tc := range []struct {
		name string
		r    result.Result
		want bool
	}{
		{"passed", result.Result{Pass: true, Parts: parts, Checks: []result.Check{{What: "ok", OK: true, Part: parts[0]}}}, false},
		{"failed", result.Result{Parts: parts, Checks: []result.Check{wrong}}, false},
		{"a wait ran out on a quiet machine", result.Result{Parts: parts, Checks: []result.Check{wait}, TimedOut: true, Limits: result.Limits{Scale: 1}}, false},
		{"a wait ran out on a loaded machine", result.Result{Parts: parts, Checks: []result.Check{wait}, TimedOut: true, Limits: result.Limits{Scale: 2.5}}, true},
		{"a wait and a wrong answer", result.Result{Parts: parts, Checks: []result.Check{wait, wrong}, Limits: result.Limits{Scale: 2.5}}, false},
		{"the lab erred", result.Result{NotJudged: result.Error, Problem: "could not make the work dir", Limits: result.Limits{Scale: 1}}, true},
	} {
		if got := tc.r.Retryable(); got != tc.want {
			t.Errorf("%s: Retryable() = %v, want %v", tc.name, got, tc.want)
		}
	}
}
