package queue_test

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"

	"snacklab/queue"
)

// The queue's costs are meant to be one commit per operation. These three
// benchmarks run on the same disk in the same run, so their ratio says how
// close the queue gets to the floor: compare ns/op of Enqueue and of
// ClaimFinish (two operations) with RawCommit.

// BenchmarkRawCommit is the floor: one INSERT in its own transaction, with the
// queue's pragmas (rollback journal, synchronous=FULL).
func BenchmarkRawCommit(b *testing.B) {
	path := filepath.Join(b.TempDir(), "raw.db")
	db, err := sql.Open("sqlite", "file:"+path+"?_journal_mode=DELETE&_synchronous=FULL&_txlock=immediate")
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	if _, err := db.Exec("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)"); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		if _, err := db.Exec("INSERT INTO t (v) VALUES (?)", fmt.Sprint("o-", i)); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEnqueue(b *testing.B) {
	q, _ := openNew(b)
	ctx := context.Background()
	for i := 0; b.Loop(); i++ {
		if _, _, err := q.Enqueue(ctx, queue.NewJob{ID: fmt.Sprint("o-", i), Qty: 7, MaxAttempts: 5, DeadlineWindowMs: 60_000}, t0); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkClaimFinish is one claim and one finish (two commits) per op.
func BenchmarkClaimFinish(b *testing.B) {
	q, path := openNew(b)
	ctx := context.Background()
	// Fill outside the timer with one transaction, so only claim+finish is timed.
	db, err := sql.Open("sqlite", path)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := db.Exec(`WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i+1 FROM n WHERE i < 100000)
		INSERT INTO jobs (id, qty, max_attempts, available_at, deadline_at, deadline_window_ms, created_at, updated_at)
		SELECT printf('o-%06d', i), 7, 5, ?1, ?1 + 60000, 60000, ?1, ?1 FROM n`, t0); err != nil {
		b.Fatal(err)
	}
	db.Close()
	b.ResetTimer()
	for b.Loop() {
		j, ok, err := q.Claim(ctx, "A", t0, 30_000)
		if err != nil || !ok {
			b.Fatalf("claim: ok=%v %v", ok, err)
		}
		if _, applied, err := q.Finish(ctx, j.ID, j.Token, queue.OutcomeOK, t0); err != nil || !applied {
			b.Fatalf("finish: applied=%v %v", applied, err)
		}
	}
}
