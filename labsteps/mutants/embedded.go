//go:build !nomutants

package mutants

import "embed"

// files holds the wrong answers and the variants (correct answers). This file and the mutants are left out of
// a learner's starter copy (`lab starter`), and of the lab built for the
// grading containers (-tags nomutants, internal/isolate): a mutant's
// search texts are the reference solution.
//
//go:embed *.mutant *.variant
var files embed.FS

func init() {
	embedded = files
	carries = carriesMark
}

// carriesMark is in every lab that embeds the mutants, and in no other:
// isolate.New refuses a lab binary that holds it.
const carriesMark = "snacklab-mutants: this binary carries the reference's lines"
