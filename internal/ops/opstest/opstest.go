// Package opstest builds queue files in known states for the tests of the
// operator tools, through the queue's own API and an injected clock, so that
// every figure a report shows can be checked against a number written down
// by hand.
package opstest

import (
	"context"
	"path/filepath"
	"testing"

	"snacklab/queue"
)

// QtyBase is where the quantities of fixture jobs start. The values are
// unusual on purpose: finding "4242" in an alert or a list means an order's
// content leaked where only identifiers belong.
const (
	QtyBase   = 424200
	QtyMarker = "4242"
)

// Now is the clock the expected figures below are measured against.
const Now = 100_000

// The figures of Known at Now, worked out by hand from the steps in Known.
const (
	Pending, Leased, Done, Dead           = 4, 2, 2, 6
	Permanent, Exhausted, Deadline        = 2, 3, 1
	OldestID                              = "perm-1"
	OldestReason                          = queue.ReasonPermanent
	OldestSinceMs                         = 2000
	LastInvestigationMs                   = 21000
	Investigations                        = 2
	Redrives                              = 6 // rd-twice has two
	RedrivenJobs                          = 5
	RedrivenDone, RedrivenDead            = 1, 1
	RedrivenPending, RedrivenLeased       = 2, 1
	RedrivenInFlight                      = RedrivenPending + RedrivenLeased
	LongLease                       int64 = 86_400_000
)

// DeadIDs are the dead jobs of Known, oldest first (by when they died).
var DeadIDs = []string{"perm-1", "perm-2", "exh-1", "exh-2", "dl-1", "rd-dead"}

// Builder drives a queue through the API with explicit times.
type Builder struct {
	T   testing.TB
	Q   *queue.Queue
	qty int64
}

// NewFile creates an empty queue file in a fresh temporary directory.
func NewFile(t testing.TB) (*queue.Queue, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "queue.db")
	q, err := queue.Open(path, queue.Options{Create: true})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { q.Close() })
	return q, path
}

// Enqueue adds a job at now.
func (b *Builder) Enqueue(id string, maxAttempts, windowMs, now int64) {
	b.T.Helper()
	b.qty++
	if _, _, err := b.Q.Enqueue(context.Background(), queue.NewJob{ID: id, Qty: QtyBase + b.qty, MaxAttempts: maxAttempts, DeadlineWindowMs: windowMs}, now); err != nil {
		b.T.Fatalf("enqueue %s: %v", id, err)
	}
}

// Claim leases the one due job, which must be id.
func (b *Builder) Claim(id string, now int64) queue.Job {
	b.T.Helper()
	job, ok, err := b.Q.Claim(context.Background(), "tester", now, LongLease)
	if err != nil || !ok || job.ID != id {
		b.T.Fatalf("claim at %d: got %q ok=%v err=%v, want %s", now, job.ID, ok, err, id)
	}
	return job
}

// Finish claims id and finishes it with outcome, all at now; want is the
// state it must end in.
func (b *Builder) Finish(id string, outcome queue.Outcome, now int64, want queue.State) {
	b.T.Helper()
	job := b.Claim(id, now)
	got, applied, err := b.Q.Finish(context.Background(), id, job.Token, outcome, now)
	if err != nil || !applied || got.State != want {
		b.T.Fatalf("finish %s %s: state %s applied=%v err=%v, want %s", id, outcome, got.State, applied, err, want)
	}
}

// Redrive redrives id at now.
func (b *Builder) Redrive(id, note string, now int64) {
	b.T.Helper()
	if _, _, err := b.Q.Redrive(context.Background(), id, note, now); err != nil {
		b.T.Fatalf("redrive %s: %v", id, err)
	}
}

// Investigate records a look at id at now.
func (b *Builder) Investigate(id, note string, now int64) {
	b.T.Helper()
	if _, err := b.Q.Investigate(context.Background(), id, note, now); err != nil {
		b.T.Fatalf("investigate %s: %v", id, err)
	}
}

// Known builds the fixture whose figures are the constants above. Each job
// is taken through its whole story before the next is enqueued, so that
// every claim finds exactly the job meant; jobs that stay pending come last.
func Known(t testing.TB) (*queue.Queue, string) {
	t.Helper()
	q, path := NewFile(t)
	b := &Builder{T: t, Q: q}
	const day = 86_400_000
	b.Enqueue("done-1", 3, day, 1000)
	b.Finish("done-1", queue.OutcomeOK, 1000, queue.Done)
	b.Enqueue("perm-1", 3, day, 2000)
	b.Finish("perm-1", queue.OutcomePermanent, 2000, queue.Dead)
	b.Enqueue("perm-2", 3, day, 3000)
	b.Finish("perm-2", queue.OutcomePermanent, 3000, queue.Dead)
	b.Enqueue("exh-1", 1, day, 4000)
	b.Finish("exh-1", queue.OutcomeRetry, 4000, queue.Dead)
	b.Enqueue("exh-2", 1, day, 5000)
	b.Finish("exh-2", queue.OutcomeRetry, 5000, queue.Dead)
	b.Enqueue("dl-1", 5, 10, 6000) // the first backoff (>= 500 ms) overshoots a 10 ms window
	b.Finish("dl-1", queue.OutcomeRetry, 6000, queue.Dead)

	b.Enqueue("rd-done", 3, day, 7000)
	b.Finish("rd-done", queue.OutcomePermanent, 7000, queue.Dead)
	b.Redrive("rd-done", "INC-1", 8000)
	b.Finish("rd-done", queue.OutcomeOK, 8000, queue.Done)
	b.Enqueue("rd-dead", 1, day, 9000)
	b.Finish("rd-dead", queue.OutcomeRetry, 9000, queue.Dead)
	b.Redrive("rd-dead", "INC-2", 10000)
	b.Finish("rd-dead", queue.OutcomeRetry, 10000, queue.Dead)
	b.Enqueue("rd-leased", 3, day, 13000)
	b.Finish("rd-leased", queue.OutcomePermanent, 13000, queue.Dead)
	b.Redrive("rd-leased", "INC-3", 14000)
	b.Claim("rd-leased", 14000)
	b.Enqueue("rd-twice", 3, day, 15000)
	b.Finish("rd-twice", queue.OutcomePermanent, 15000, queue.Dead)
	b.Redrive("rd-twice", "INC-4", 16000)
	b.Finish("rd-twice", queue.OutcomePermanent, 16000, queue.Dead)
	b.Enqueue("lease-1", 3, day, 18000)
	b.Claim("lease-1", 18000)
	b.Enqueue("rd-pending", 3, day, 18500)
	b.Finish("rd-pending", queue.OutcomePermanent, 18500, queue.Dead)

	// From here on nothing is claimed.
	b.Redrive("rd-pending", "INC-5", 19000)
	b.Redrive("rd-twice", "INC-6", 19000)
	b.Enqueue("pend-1", 3, day, 19500)
	b.Enqueue("pend-2", 3, day, 19500)
	b.Investigate("perm-1", "INC-7", 20000)
	b.Investigate("exh-1", "INC-8", 21000)
	return q, path
}

// DeadBatch adds n jobs quarantined with reason exhausted, ids prefix-000…,
// dying 1 ms apart from start, for the bulk redrive tests.
func DeadBatch(t testing.TB, q *queue.Queue, prefix string, n int, start int64) []string {
	t.Helper()
	b := &Builder{T: t, Q: q}
	ids := make([]string, n)
	for i := range n {
		id := prefix + "-" + string(rune('0'+i/100%10)) + string(rune('0'+i/10%10)) + string(rune('0'+i%10))
		now := start + int64(i)
		b.Enqueue(id, 1, 86_400_000, now)
		b.Finish(id, queue.OutcomeRetry, now, queue.Dead)
		ids[i] = id
	}
	return ids
}

// DiedAfterThree builds, in a fresh file, the job "ev-1" that died after a
// 503 (at now), a timeout (now+60s) and a BadAck (now+120s, the job left
// leased), quarantined by the claim at now+300s that found its last lease
// spent. It returns the queue and its path.
func DiedAfterThree(t testing.TB, now int64) (*queue.Queue, string) {
	t.Helper()
	ctx := context.Background()
	q, path := NewFile(t)
	b := &Builder{T: t, Q: q}
	b.Enqueue("ev-1", 3, 86_400_000, now)
	finish := func(at int64, ev queue.Evidence) {
		job, ok, err := q.Claim(ctx, "tester", at, 30_000)
		if err != nil || !ok {
			t.Fatalf("claim at %d: ok=%v err=%v", at, ok, err)
		}
		if _, applied, err := q.Finish(ctx, "ev-1", job.Token, queue.OutcomeRetry, at, ev); err != nil || !applied {
			t.Fatalf("finish at %d: applied=%v err=%v", at, applied, err)
		}
	}
	finish(now, queue.Evidence{Status: 503, Error: queue.ErrorHTTP})
	finish(now+60_000, queue.Evidence{Error: queue.ErrorTimeout})
	job, ok, err := q.Claim(ctx, "tester", now+120_000, 30_000)
	if err != nil || !ok {
		t.Fatalf("third claim: ok=%v err=%v", ok, err)
	}
	if applied, err := q.NoteAttempt(ctx, "ev-1", job.Token, queue.Evidence{Status: 200, Error: queue.ErrorBadAck}, now+120_000); err != nil || !applied {
		t.Fatalf("note attempt: applied=%v err=%v", applied, err)
	}
	if _, ok, err := q.Claim(ctx, "tester", now+300_000, 30_000); err != nil || ok {
		t.Fatalf("claim after the last lease: ok=%v err=%v, want nothing claimable", ok, err)
	}
	return q, path
}
