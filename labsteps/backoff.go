package labsteps

import "strconv"

// Backoff constants of CONTRACT §2.
const (
	backoffBase = 1000  // ms
	backoffCap  = 60000 // ms
)

// expectedBackoff is the contract's formula, written out again here from the
// text rather than imported, so the lab judges an implementation by the
// contract and not by the reference's own code:
//
//	d     = min(cap, base * 2^(attempt-1))
//	h     = FNV-1a-64 of "<id>:<attempt>"
//	delay = d/2 + (h mod (d/2 + 1))
func expectedBackoff(id string, attempt int) int64 {
	half := backoffCeiling(attempt) / 2
	return half + int64(fnv1a64(id+":"+strconv.Itoa(attempt))%uint64(half+1))
}

// fnv1a64 is FNV-1a with 64-bit offset basis and prime, byte by byte.
func fnv1a64(s string) uint64 {
	const (
		offset = 14695981039346656037
		prime  = 1099511628211
	)
	h := uint64(offset)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= prime
	}
	return h
}

// backoffCeiling is d for an attempt: the largest delay the formula allows.
func backoffCeiling(attempt int) int64 {
	d := int64(backoffBase)
	for i := 1; i < attempt && d < backoffCap; i++ {
		d *= 2
	}
	return min(d, backoffCap)
}
