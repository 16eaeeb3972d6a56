package mutants

import "embed"

// embedded holds the wrong answers. This file and the patches are left out
// of a learner's starter copy (`lab starter`): a patch's context lines are
// the reference solution.
//
//go:embed *.patch
var embedded embed.FS

func init() { patches = embedded }
