package model

import "math/rand/v2"

// ids is a small pool so that duplicates, conflicts and unknown ids are
// frequent; the last is never enqueued by choice of weights alone.
var ids = []string{"a", "b", "o-1", "x.9"}

// Generate is a seeded random sequence of n operations, biased to where the
// contract's rules meet: the clock jumps to each lease_until, available_at
// and deadline_at and one ms either side, finishes carry the current token,
// the one before or after it, and redrives aim at jobs in every state. It
// runs the model alongside to know those boundaries; the same seed always
// gives the same sequence.
func Generate(seed uint64, n int) []Op {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	q := New()
	now := int64(1_000_000)
	ops := make([]Op, 0, n)
	for len(ops) < n {
		now = nextNow(r, q, now)
		op := Op{Now: now, ID: ids[r.IntN(len(ids))]}
		switch k := r.IntN(20); {
		case k < 4:
			op.Verb = "enqueue"
			op.Qty = 1 + int64(r.IntN(2)) // two qtys: conflicts happen
			op.MaxAttempts = 1 + int64(r.IntN(4))
			op.DeadlineMs = []int64{1, 5000, 60000, 600000, 600000, 600000}[r.IntN(6)]
		case k < 9:
			op.Verb = "claim"
			op.Owner = []string{"A", "B"}[r.IntN(2)]
			op.LeaseMs = []int64{1, 1000, 3000}[r.IntN(3)]
		case k < 15:
			op.Verb = "finish"
			op.Outcome = []string{"ok", "retry", "retry", "retry", "permanent"}[r.IntN(5)]
			if j := jobIn(r, q, "leased"); j != nil && r.IntN(5) > 0 {
				op.ID = j.ID
			}
			if j, ok := q.Jobs[op.ID]; ok {
				op.Token = j.Token // the fence's own token most often; else one either side
				if r.IntN(5) < 2 {
					op.Token = max(0, j.Token+[]int64{-1, 1}[r.IntN(2)])
				}
			}
		case k < 17:
			op.Verb = "redrive"
			op.Note = []string{"T-1", "fix#2"}[r.IntN(2)]
			// A dead job most often (the redrive that applies, and what
			// follows it: a fresh budget under an old token), else any.
			if j := jobIn(r, q, "dead"); j != nil && r.IntN(5) > 1 {
				op.ID = j.ID
			}
		case k < 19:
			op.Verb = "show"
		default:
			op.Verb = "stats"
			op.ID = ""
		}
		q.Apply(op)
		ops = append(ops, op)
	}
	return ops
}

// nextNow lands on a boundary still ahead (exact, or 1 ms either side, so
// the clock may step back by one): a lease's end or a backoff's due time
// often, a deadline now and then (each deadline kills its job, so landing
// on them too often leaves nothing to claim); else it steps forward a
// little, and rarely far.
func nextNow(r *rand.Rand, q *Queue, now int64) int64 {
	var due, deadlines []int64
	for _, id := range ids { // the pool's order, not the map's: seeded runs repeat
		j, ok := q.Jobs[id]
		if !ok {
			continue
		}
		if j.State == "leased" && j.LeaseUntil >= now {
			due = append(due, j.LeaseUntil)
		}
		if j.State == "pending" && j.AvailableAt >= now {
			due = append(due, j.AvailableAt)
		}
		if (j.State == "pending" || j.State == "leased") && j.DeadlineAt >= now {
			deadlines = append(deadlines, j.DeadlineAt)
		}
	}
	near := func(ms []int64) int64 { return max(0, ms[r.IntN(len(ms))]+int64(r.IntN(3))-1) }
	switch k := r.IntN(10); {
	case k < 4 && len(due) > 0:
		return near(due)
	case k == 4 && len(deadlines) > 0:
		return near(deadlines)
	case k < 9:
		return now + int64(r.IntN(2000))
	default:
		return now + 100_000
	}
}

// jobIn is a seeded choice of the jobs in state, nil when there is none.
func jobIn(r *rand.Rand, q *Queue, state string) *Job {
	var l []*Job
	for _, id := range ids { // map order is random: walk the pool for a seeded choice
		if j, ok := q.Jobs[id]; ok && j.State == state {
			l = append(l, j)
		}
	}
	if len(l) == 0 {
		return nil
	}
	return l[r.IntN(len(l))]
}
