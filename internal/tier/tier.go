// Package tier splits snacklab's tests into two tiers.
//
// The README's test command, `go test -race -timeout 30m ./...`, is the fast
// tier: unit tests, one full lab run of the reference, the contract registry
// and a short crash and power-cut sample, in at most 5 minutes on a 2-core
// machine (issue 38; docs/performance.md has the measured time). A newcomer
// learns in minutes that the tests pass, and a developer gets that answer for
// every push.
//
// The slow tier is the proofs that take minutes each: selftest-like loops
// over mutants, hostile cohorts, cohort grading, container (Docker) tests,
// forced-race loops, simulations and long crash soaks. They still run, in
// their own stage of .ci/run after the fast tier, with SNACKLAB_SLOW=1; the
// stage finds them with .ci/slow-tests (every Test function that calls
// tier.Slow or tier.On), so a newly marked test is picked up and none runs
// twice. Run them by hand with
//
//	SNACKLAB_SLOW=1 go test -race -timeout 60m ./...
//
// (or with .ci/slow-tests' -run patterns, package by package).
package tier

import (
	"os"
	"testing"
)

// Env is the variable that turns the slow tier on: SNACKLAB_SLOW=1.
const Env = "SNACKLAB_SLOW"

// On reports whether the slow tier runs: SNACKLAB_SLOW=1.
func On() bool { return os.Getenv(Env) == "1" }

// Slow skips t unless the slow tier is on. Call it first in a slow test's
// body, so .ci/slow-tests finds the test and the fast tier skips it at once.
func Slow(t testing.TB) {
	t.Helper()
	if !On() {
		t.Skip("slow tier: runs with SNACKLAB_SLOW=1 (" + Env + "=1 go test -race -timeout 60m -run '^" + t.Name() + "$' <package>); .ci/run runs it in its slow stage")
	}
}
