package queue_test

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"snacklab/queue"
)

// TestCheckSnapshotFindsWhatCheckFinds: the check of a snapshot sees the
// file as it is, the done tally included.
func TestCheckSnapshotFindsWhatCheckFinds(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "q.db")
	q, err := queue.Open(path, queue.Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 50 {
		id := fmt.Sprintf("o-%d", i)
		if _, _, err := q.Enqueue(ctx, queue.NewJob{ID: id, Qty: 1, MaxAttempts: 3, DeadlineWindowMs: 100_000}, 1); err != nil {
			t.Fatal(err)
		}
	}
	for range 10 {
		job, ok, err := q.Claim(ctx, "A", 2, 1000)
		if err != nil || !ok {
			t.Fatalf("claim: %v %v", ok, err)
		}
		if _, _, err := q.Finish(ctx, job.ID, job.Token, queue.OutcomeOK, 3, queue.Evidence{Status: 200}); err != nil {
			t.Fatal(err)
		}
	}
	if p, n, st, err := q.CheckSnapshot(ctx, 10, queue.SnapshotOptions{PagesPerStep: 1}); err != nil || n != 0 || st.Pages < 2 || st.Steps < st.Pages {
		t.Fatalf("CheckSnapshot of a healthy file = %v, %d, %+v, %v; want no problems, one step per page", p, n, st, err)
	}
	q.Close()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("UPDATE tallies SET n = 7 WHERE name = 'done'"); err != nil {
		t.Fatal(err)
	}
	db.Close()
	q, err = queue.Open(path, queue.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	want, wantN, err := q.Check(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	got, gotN, _, err := q.CheckSnapshot(ctx, 0, queue.SnapshotOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if gotN != wantN || fmt.Sprint(got) != fmt.Sprint(want) || wantN != 1 || want[0].Rule != "tally-done" {
		t.Errorf("CheckSnapshot = %v (%d), Check = %v (%d); want both the one tally-done problem", got, gotN, want, wantN)
	}
}

// TestSnapshotEndsUnderAWriter: another process's commits between steps
// restart the copy; the steps grow, so it ends, with a consistent copy.
func TestSnapshotEndsUnderAWriter(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "q.db")
	q, err := queue.Open(path, queue.Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	w, err := queue.Open(path, queue.Options{}) // its own connection, as another process's
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	for i := range 300 {
		if _, _, err := q.Enqueue(ctx, queue.NewJob{ID: fmt.Sprintf("a-%d", i), Qty: 1, MaxAttempts: 3, DeadlineWindowMs: 100_000}, 1); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select { // a writer that commits every few milliseconds, as a busy sender does
			case <-done:
				return
			case <-time.After(2 * time.Millisecond):
			}
			if _, _, err := w.Enqueue(ctx, queue.NewJob{ID: fmt.Sprintf("w-%d", i), Qty: 1, MaxAttempts: 3, DeadlineWindowMs: 100_000}, 1); err != nil {
				t.Errorf("writer: %v", err)
				return
			}
		}
	}()
	p, n, st, err := q.CheckSnapshot(ctx, 10, queue.SnapshotOptions{PagesPerStep: 1})
	close(done)
	wg.Wait()
	if err != nil || n != 0 {
		t.Fatalf("CheckSnapshot under a writer = %v, %d, %+v, %v; want a consistent copy", p, n, st, err)
	}
	t.Logf("snapshot under a writer: %+v", st)
}
