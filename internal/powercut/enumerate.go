package powercut

import (
	"fmt"
	"math/rand/v2"
	"strings"
)

// Budget bounds the states built at each barrier. The space is every
// combination of every in-flight write's sectors and every prefix of the
// in-flight directory operations: exponential, so beyond Exhaustive
// combinations of whole operations it is covered by systematic states
// (everything, nothing, each operation dropped alone, …) and Samples random
// ones drawn from the seed.
type Budget struct {
	Name string `json:"name"`
	// Exhaustive: every combination of whole operations (each kept or
	// dropped, directory operations as a prefix) when there are at most
	// this many; otherwise the systematic states.
	Exhaustive int `json:"exhaustive"`
	// Prefixes adds the in-order prefixes of the in-flight operations:
	// what a process crash there leaves, which lab crash's crash points
	// also check. Alone adds, per in-flight operation, the state where it
	// alone of them reached the disk.
	Prefixes bool `json:"prefixes"`
	Alone    bool `json:"alone"`
	// AllTears tears each multi-sector write at every sector boundary
	// (first j sectors kept, and last j); otherwise once, in the middle.
	AllTears bool `json:"all_tears"`
	// Samples random states per barrier: each in-flight operation kept or
	// dropped, a kept write torn at random sectors one time in four.
	Samples int `json:"samples"`
}

// The two budgets `lab crash --power-cut` knows: Small for CI and grading,
// Full for an engineer's run.
var (
	Small = Budget{Name: "small", Exhaustive: 16, Samples: 2}
	Full  = Budget{Name: "full", Exhaustive: 1024, Prefixes: true, Alone: true, AllTears: true, Samples: 32}
)

// Budgets by name.
var Budgets = map[string]Budget{Small.Name: Small, Full.Name: Full}

// State is one set of fates for a barrier's in-flight operations.
type State struct {
	Barrier int    `json:"barrier"` // index in Model.Barriers
	Index   int    `json:"index"`   // index in States' answer for that barrier
	Label   string `json:"label"`   // how it was chosen: "all kept", "all but #19", "#18 torn", "sample 3"
	Fates   []Fate `json:"fates"`   // one per Barrier.InFlight
}

// States lists the states the budget builds at barrier bi, deterministic
// for a recording of the same shape, budget and seed: a state is replayed
// by its barrier and index. States with the same fates are listed once.
func (m *Model) States(bi int, budget Budget, seed int64) []State {
	b := m.Barriers[bi]
	e := &enum{bi: bi, inFlight: b.InFlight, seen: map[string]bool{}}
	for _, i := range b.InFlight {
		e.ops = append(e.ops, m.Rec.Ops[i])
	}
	e.add("all kept", e.whole(func(int) bool { return true }))
	e.add("none kept", e.whole(func(int) bool { return false }))
	if combos(e.ops) <= budget.Exhaustive {
		e.combinations()
	} else {
		e.systematic(budget)
	}
	e.tears(budget.AllTears)
	rng := rand.New(rand.NewPCG(uint64(seed), uint64(bi)))
	for r := 0; r < budget.Samples && len(e.ops) > 0; r++ {
		f := make([]Fate, len(e.ops))
		for k, op := range e.ops {
			f[k].Keep = rng.IntN(2) == 1
			if s := sectors(op); f[k].Keep && s > 1 && rng.IntN(4) == 0 {
				f[k] = Fate{Sectors: sectorMask(s, func(int) bool { return rng.IntN(2) == 1 })}
			}
		}
		e.add(fmt.Sprintf("sample %d (seed %d)", r+1, seed), f)
	}
	return e.out
}

// enum collects the states of one barrier, each once.
type enum struct {
	bi       int
	inFlight []int
	ops      []Op
	seen     map[string]bool
	out      []State
}

func (e *enum) add(label string, fates []Fate) {
	canonical(e.ops, fates)
	key := fateKey(fates)
	if e.seen[key] {
		return
	}
	e.seen[key] = true
	e.out = append(e.out, State{Barrier: e.bi, Index: len(e.out), Label: label, Fates: fates})
}

// whole is the state where each in-flight operation is kept whole or
// dropped as keep says.
func (e *enum) whole(keep func(k int) bool) []Fate {
	f := make([]Fate, len(e.ops))
	for k := range f {
		f[k].Keep = keep(k)
	}
	return f
}

// combinations adds every combination of whole writes and truncates, times
// every prefix of the directory operations.
func (e *enum) combinations() {
	var data, dir []int
	for k, op := range e.ops {
		if isDirOp(op) {
			dir = append(dir, k)
		} else {
			data = append(data, k)
		}
	}
	for mask := 0; mask < 1<<len(data); mask++ {
		for p := 0; p <= len(dir); p++ {
			f := make([]Fate, len(e.ops))
			for x, k := range data {
				f[k].Keep = mask&(1<<x) != 0
			}
			for x, k := range dir {
				f[k].Keep = x < p
			}
			e.add("combination: "+keptList(e.inFlight, f), f)
		}
	}
}

// systematic adds, when there are too many combinations, each operation
// dropped alone (and with the budget, each in-order prefix and each
// operation kept alone).
func (e *enum) systematic(budget Budget) {
	n := len(e.ops)
	for j := 1; j < n && budget.Prefixes; j++ {
		e.add(fmt.Sprintf("in order up to #%d", e.inFlight[j-1]), e.whole(func(k int) bool { return k < j }))
	}
	for j := 0; j < n; j++ {
		e.add(fmt.Sprintf("all but #%d", e.inFlight[j]), e.whole(func(k int) bool { return k != j }))
	}
	for j := 0; j < n && budget.Alone; j++ {
		e.add(fmt.Sprintf("only #%d", e.inFlight[j]), e.whole(func(k int) bool { return k == j }))
	}
}

// tears adds each multi-sector write torn, the others kept: in the middle,
// or with all, at every sector boundary (first j sectors kept, and last j).
func (e *enum) tears(all bool) {
	for j, op := range e.ops {
		s := sectors(op)
		if s < 2 {
			continue
		}
		cuts := []int{s / 2}
		if all {
			cuts = cuts[:0]
			for c := 1; c < s; c++ {
				cuts = append(cuts, c)
			}
		}
		for _, c := range cuts {
			f := e.whole(func(int) bool { return true })
			f[j] = Fate{Sectors: sectorMask(s, func(x int) bool { return x < c })}
			e.add(fmt.Sprintf("#%d torn: first %d of %d sectors", e.inFlight[j], c, s), f)
			if all {
				f := e.whole(func(int) bool { return true })
				f[j] = Fate{Sectors: sectorMask(s, func(x int) bool { return x >= c })}
				e.add(fmt.Sprintf("#%d torn: last %d of %d sectors", e.inFlight[j], s-c, s), f)
			}
		}
	}
}

// Exhaustive says whether the budget builds every combination of whole
// operations at barrier bi (each write or truncate kept or dropped, each
// prefix of the directory operations); tears are never all built.
func (m *Model) Exhaustive(bi int, budget Budget) bool {
	var ops []Op
	for _, i := range m.Barriers[bi].InFlight {
		ops = append(ops, m.Rec.Ops[i])
	}
	return combos(ops) <= budget.Exhaustive
}

// combos is how many combinations of whole operations there are: each
// write or truncate kept or not, times the prefixes of the directory
// operations (capped, to say "too many").
func combos(ops []Op) int {
	data, dir := 0, 0
	for _, op := range ops {
		if isDirOp(op) {
			dir++
		} else {
			data++
		}
	}
	if data > 20 {
		return 1 << 30
	}
	return (1 << data) * (dir + 1)
}

func isDirOp(op Op) bool { return op.Kind == Create || op.Kind == Unlink || op.Kind == Rename }

// canonical applies the rule of directory operations (kept in order: after
// one dropped, the later ones are dropped too) and turns a torn write with
// every sector kept, or none, into a whole one, so equal states compare
// equal.
func canonical(ops []Op, fates []Fate) {
	cut := false
	for k, op := range ops {
		f := &fates[k]
		if isDirOp(op) {
			if cut || !f.Keep {
				cut, f.Keep = true, false
			}
			f.Sectors = nil
			continue
		}
		if f.torn() {
			all, none := true, true
			for _, s := range f.Sectors {
				all, none = all && s, none && !s
			}
			if all || none {
				*f = Fate{Keep: all}
			} else {
				f.Keep = false
			}
		}
	}
}

func fateKey(fates []Fate) string {
	var b strings.Builder
	for _, f := range fates {
		switch {
		case f.torn():
			b.WriteByte('[')
			for _, s := range f.Sectors {
				b.WriteByte(map[bool]byte{true: '#', false: '.'}[s])
			}
			b.WriteByte(']')
		case f.Keep:
			b.WriteByte('K')
		default:
			b.WriteByte('D')
		}
	}
	return b.String()
}

func sectorMask(n int, keep func(int) bool) []bool {
	m := make([]bool, n)
	for i := range m {
		m[i] = keep(i)
	}
	return m
}

// keptList names the in-flight operations a whole-operation state keeps.
func keptList(inFlight []int, fates []Fate) string {
	var kept []string
	for k, f := range fates {
		if f.Keep {
			kept = append(kept, fmt.Sprintf("#%d", inFlight[k]))
		}
	}
	if len(kept) == 0 {
		return "none kept"
	}
	return "keeps " + strings.Join(kept, " ")
}
