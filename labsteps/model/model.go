// Package model is a model of the queue of CONTRACT.md §2–§3, written from
// the contract's text alone and independent of queue/: it says what each
// queuectl answer must be (exit code and the JSON members the contract pins
// down), never how an implementation computes it. A driver (run.go) plays
// seeded random operations against a real queuectl and compares every answer
// with the model; a mismatch is shrunk to the shortest sequence that still
// fails (shrink.go).
//
// Covered: enqueue (new, duplicate, conflict), claim (sweep to dead
// exhausted/deadline, due and expiry instants, order, grant), finish (ok,
// permanent, retry to pending/exhausted/deadline with the exact backoff,
// stale and unknown tokens), redrive (dead only, refusals 8–11, audit row),
// show and stats, one process at a time under --now-ms. Not covered yet:
// investigate, check, the optional evidence verbs, flag and value rules
// (§1), files (§2.file), restarts, crashes, two writers and busy waits
// (§2.busy), stderr wording.
package model

import (
	"fmt"
	"hash/fnv"
	"sort"
)

// Job is one row of the queue as the contract defines it (§2, §3.json.job).
// LeaseUntil and Reason/Owner use "unset" values (HasLease false, "") for
// the JSON null the contract asks for.
type Job struct {
	ID             string
	Qty            int64
	State          string // pending, leased, done, dead
	Reason         string // "" when not dead (§2.state.reason)
	Attempts       int64
	MaxAttempts    int64
	Token          int64
	Owner          string // "" when not leased (§2.state.owner-lease)
	LeaseUntil     int64
	HasLease       bool
	AvailableAt    int64
	DeadlineAt     int64
	DeadlineWindow int64
	CreatedAt      int64
	UpdatedAt      int64
}

// Redrive is one audit row (§2.redrive.audit, §3.json.redrive).
type Redrive struct {
	JobID      string
	PrevToken  int64
	PrevReason string
	AtMs       int64
	Note       string
}

// Queue is the model's whole state: the jobs and the redrive audit.
type Queue struct {
	Jobs     map[string]*Job
	Redrives []Redrive
}

// New is an empty queue, as `queuectl init` leaves it.
func New() *Queue { return &Queue{Jobs: map[string]*Job{}} }

// Expect is what the contract says one command must answer. JSON holds only
// the members it pins down (nil: stdout must be empty, §3.stdout.refusal);
// EitherOrder names arrays whose order the contract leaves free (oldest or
// newest first, §3.show.history). Clause is the rule that decides the answer.
type Expect struct {
	Exit        int
	JSON        map[string]any
	EitherOrder []string
	Clause      string
}

// Backoff is §2.backoff.formula, deterministic: the model needs no jitter
// tolerance because the contract defines the hash.
func Backoff(id string, attempt int64) int64 {
	const base, cap = 1000, 60000
	d := int64(cap)
	if attempt-1 < 6 { // 1000*2^6 > cap: stop shifting before overflow
		d = min(int64(cap), int64(base)<<(attempt-1))
	}
	h := fnv.New64a()
	fmt.Fprintf(h, "%s:%d", id, attempt)
	half := uint64(d / 2)
	return int64(half + h.Sum64()%(half+1))
}

// Apply runs one operation on the model and returns what the implementation
// must answer. The model changes only when the contract says the operation
// writes.
func (q *Queue) Apply(op Op) Expect {
	switch op.Verb {
	case "enqueue":
		return q.enqueue(op)
	case "claim":
		return q.claim(op)
	case "finish":
		return q.finish(op)
	case "redrive":
		return q.redrive(op)
	case "show":
		return q.show(op)
	case "stats":
		return q.stats()
	}
	panic("model: unknown verb " + op.Verb)
}

func (q *Queue) enqueue(op Op) Expect {
	if j, ok := q.Jobs[op.ID]; ok {
		if j.Qty != op.Qty {
			return Expect{Exit: 7, Clause: "§2.enqueue.conflict"}
		}
		return Expect{JSON: map[string]any{"job": j.json(), "duplicate": true}, Clause: "§2.enqueue.dup"}
	}
	j := &Job{ID: op.ID, Qty: op.Qty, State: "pending", MaxAttempts: op.MaxAttempts,
		AvailableAt: op.Now, DeadlineAt: op.Now + op.DeadlineMs, DeadlineWindow: op.DeadlineMs,
		CreatedAt: op.Now, UpdatedAt: op.Now}
	q.Jobs[op.ID] = j
	return Expect{JSON: map[string]any{"job": j.json(), "duplicate": false}, Clause: "§2.enqueue.new"}
}

// claim is §2.claim: the sweep first (committed even when nothing is then
// claimable), then one grant in (available_at, id) order.
func (q *Queue) claim(op Op) Expect {
	now := op.Now
	swept := map[string]bool{} // the sweep's clauses, named with the answer's
	for _, j := range q.Jobs {
		switch {
		case j.State == "leased" && j.LeaseUntil <= now && j.Attempts >= j.MaxAttempts:
			j.quarantine("exhausted", now)
			swept["§2.claim.sweep.exhausted"] = true
		case j.State == "leased" && j.LeaseUntil <= now && j.DeadlineAt <= now:
			j.quarantine("deadline", now)
			swept["§2.claim.sweep.deadline"] = true
		case j.State == "pending" && j.DeadlineAt <= now:
			j.quarantine("deadline", now)
			swept["§2.claim.sweep.deadline"] = true
		}
	}
	sweep := ""
	for _, c := range []string{"§2.claim.sweep.exhausted", "§2.claim.sweep.deadline"} {
		if swept[c] {
			sweep += ", " + c
		}
	}
	var due []*Job
	for _, j := range q.Jobs {
		if (j.State == "pending" && j.AvailableAt <= now) || (j.State == "leased" && j.LeaseUntil <= now) {
			due = append(due, j)
		}
	}
	if len(due) == 0 {
		return Expect{Exit: 13, JSON: map[string]any{"claimed": false}, Clause: "§2.claim.due" + sweep}
	}
	sort.Slice(due, func(a, b int) bool {
		if due[a].AvailableAt != due[b].AvailableAt {
			return due[a].AvailableAt < due[b].AvailableAt
		}
		return due[a].ID < due[b].ID
	})
	j := due[0]
	clause := "§2.claim.grant, §2.claim.order"
	if j.State == "leased" {
		clause += ", §2.claim.expiry"
	}
	j.State, j.Owner, j.HasLease, j.LeaseUntil = "leased", op.Owner, true, now+op.LeaseMs
	j.Attempts++
	j.Token++
	j.UpdatedAt = now
	return Expect{JSON: map[string]any{"claimed": true, "job": j.json()}, Clause: clause + sweep}
}

// quarantine is the sweep's way to dead: token and attempts kept, owner and
// lease cleared (§2.claim.sweep.keeps).
func (j *Job) quarantine(reason string, now int64) {
	j.State, j.Reason, j.Owner, j.HasLease, j.LeaseUntil, j.UpdatedAt = "dead", reason, "", false, 0, now
}

func (q *Queue) finish(op Op) Expect {
	j, ok := q.Jobs[op.ID]
	if !ok {
		return Expect{Exit: 12, JSON: map[string]any{"applied": false, "job": nil}, Clause: "§2.finish.not-applied"}
	}
	if j.State != "leased" || j.Token != op.Token {
		return Expect{Exit: 12, JSON: map[string]any{"applied": false, "job": j.json()}, Clause: "§2.finish.fence"}
	}
	now := op.Now
	j.Owner, j.HasLease, j.LeaseUntil, j.UpdatedAt = "", false, 0, now
	clause := ""
	switch op.Outcome {
	case "ok":
		j.State, clause = "done", "§2.finish.ok"
	case "permanent":
		j.State, j.Reason, clause = "dead", "permanent", "§2.finish.permanent"
	case "retry":
		if j.Attempts >= j.MaxAttempts {
			j.State, j.Reason, clause = "dead", "exhausted", "§2.finish.retry.exhausted"
		} else if next := now + Backoff(j.ID, j.Attempts); next >= j.DeadlineAt {
			j.State, j.Reason, clause = "dead", "deadline", "§2.finish.retry.deadline"
		} else {
			j.State, j.AvailableAt, clause = "pending", next, "§2.finish.retry.pending"
		}
	}
	return Expect{JSON: map[string]any{"applied": true, "job": j.json()}, Clause: clause}
}

func (q *Queue) redrive(op Op) Expect {
	j, ok := q.Jobs[op.ID]
	if !ok {
		return Expect{Exit: 8, Clause: "§2.redrive.refused"}
	}
	switch j.State {
	case "pending":
		return Expect{Exit: 9, Clause: "§2.redrive.refused"}
	case "leased":
		return Expect{Exit: 10, Clause: "§2.redrive.refused"}
	case "done":
		return Expect{Exit: 11, Clause: "§2.redrive.refused"}
	}
	r := Redrive{JobID: j.ID, PrevToken: j.Token, PrevReason: j.Reason, AtMs: op.Now, Note: op.Note}
	q.Redrives = append(q.Redrives, r)
	j.State, j.Reason, j.Attempts = "pending", "", 0
	j.AvailableAt, j.DeadlineAt, j.UpdatedAt = op.Now, op.Now+j.DeadlineWindow, op.Now
	return Expect{JSON: map[string]any{"job": j.json(), "redrive": r.json()}, Clause: "§2.redrive.reset"}
}

func (q *Queue) show(op Op) Expect {
	j, ok := q.Jobs[op.ID]
	if !ok {
		return Expect{Exit: 8, Clause: "§3.show.unknown"}
	}
	rs := []any{}
	for _, r := range q.Redrives {
		if r.JobID == op.ID {
			rs = append(rs, r.json())
		}
	}
	return Expect{JSON: map[string]any{"job": j.json(), "redrives": rs, "investigations": []any{}},
		EitherOrder: []string{"redrives"}, Clause: "§3.show.json"}
}

func (q *Queue) stats() Expect {
	counts := map[string]any{"pending": int64(0), "leased": int64(0), "done": int64(0), "dead": int64(0)}
	reasons := map[string]any{"permanent": int64(0), "exhausted": int64(0), "deadline": int64(0)}
	for _, j := range q.Jobs {
		counts[j.State] = counts[j.State].(int64) + 1
		if j.State == "dead" {
			reasons[j.Reason] = reasons[j.Reason].(int64) + 1
		}
	}
	return Expect{JSON: map[string]any{"counts": counts, "dead_by_reason": reasons}, Clause: "§3.stats.json"}
}

// json is JOB of §3.json.job, with null for what is unset.
func (j *Job) json() map[string]any {
	m := map[string]any{"id": j.ID, "qty": j.Qty, "state": j.State, "reason": nil,
		"attempts": j.Attempts, "max_attempts": j.MaxAttempts, "token": j.Token, "owner": nil,
		"lease_until": nil, "available_at": j.AvailableAt, "deadline_at": j.DeadlineAt,
		"deadline_window_ms": j.DeadlineWindow, "created_at": j.CreatedAt, "updated_at": j.UpdatedAt}
	if j.Reason != "" {
		m["reason"] = j.Reason
	}
	if j.Owner != "" {
		m["owner"] = j.Owner
	}
	if j.HasLease {
		m["lease_until"] = j.LeaseUntil
	}
	return m
}

func (r Redrive) json() map[string]any {
	return map[string]any{"job_id": r.JobID, "prev_token": r.PrevToken, "prev_reason": r.PrevReason,
		"at_ms": r.AtMs, "note": r.Note}
}
