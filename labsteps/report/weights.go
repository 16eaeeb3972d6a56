package report

import "maps"

// defaultWeights are the parts' weights within their steps where a Scheme
// names none (1 for a part not listed): a part that a learner's copy (lab
// starter) passes before any TODO is written — help text, flags the
// starter's own code already parses, a receiver that binds — proves no
// work done, so it carries no points, and the starter scores 0. The table
// in docs/grading.md ("Default weights") is this one (TestWeightsDocumented);
// --points 1.e=1 gives such a part its share back.
var defaultWeights = map[string]float64{
	"1.e": 0, // every program's help names its verbs and flags: the starter's usage text
	"6.o": 0, // the receiver's flags at their bounds: the starter's flag parsing
	"6.q": 0, // the receiver binds its address: the starter's listener
}

// DefaultWeights are the part weights every Scheme starts from: a copy,
// "6.o" → 0.
func DefaultWeights() map[string]float64 { return maps.Clone(defaultWeights) }

// weight is part k's weight in s: its own, else the default, else 1.
func (s Scheme) weight(k string) float64 {
	if x, ok := s.Weights[k]; ok {
		return x
	}
	if x, ok := defaultWeights[k]; ok {
		return x
	}
	return 1
}
