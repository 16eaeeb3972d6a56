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

// ModelOnly is step 5 with the generated model part alone.
func ModelOnly() Step {
	s := step5
	s.run = func(h *harness.Harness) {
		h.Parallel(harness.Part{Name: "f: generated: random sequences against a model of the contract", Run: modelSequences})
	}
	return s
}

// ModelSeeds, ModelOps and ModelShrink are the model part's bounds.
var (
	ModelSeeds  = modelSeeds
	ModelOps    = modelOps
	ModelShrink = modelShrink
)
