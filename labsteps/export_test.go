package labsteps

// Internal helpers the external tests check against the standard library.
var (
	FNV1a64         = fnv1a64
	ExpectedBackoff = expectedBackoff
	BackoffCeiling  = backoffCeiling
)

// CaseClauses are the clauses a failed generated case names.
var CaseClauses = caseClauses
