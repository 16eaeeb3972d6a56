// Package snacklab holds the text of the contract the lab grades against,
// so a program can quote CONTRACT.md itself (its changelog, in the lab's
// failure lines) instead of a copy that could drift from it.
package snacklab

import _ "embed"

// Contract is CONTRACT.md, as built into the binary.
//
//go:embed CONTRACT.md
var Contract []byte
