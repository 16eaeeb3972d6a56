package labsteps

import "snacklab/labsteps/harness"

// Internal helpers the external tests check against the standard library.
var (
	FNV1a64         = fnv1a64
	ExpectedBackoff = expectedBackoff
	BackoffCeiling  = backoffCeiling
)

// CaseClauses are the clauses a failed generated case names.
var CaseClauses = caseClauses

// GeneratedOnly is step 1 with the generated part alone, for measuring what
// it rejects without the hand-written checks.
func GeneratedOnly() Step {
	s := step1
	s.run = func(h *harness.Harness) {
		h.Parallel(harness.Part{Name: "f: generated: value rules on every flag", Run: generatedValues})
	}
	return s
}
