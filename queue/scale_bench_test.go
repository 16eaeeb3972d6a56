package queue_test

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"snacklab/internal/ops"
	"snacklab/queue"
)

// BenchmarkViewsAtScale builds a queue file with SNACKLAB_BENCH_DONE done
// jobs (default 1,000,000; one big transaction), 200 dead and 100 pending,
// then times each operator view once while another connection, as another
// process would, enqueues every few milliseconds, and reports the view's
// time and the longest enqueue during it (docs/operations.md). It is a
// benchmark, so `go test` never runs it:
//
//	go test ./queue -run '^$' -bench ViewsAtScale -benchtime 1x -v
func BenchmarkViewsAtScale(b *testing.B) {
	ctx := context.Background()
	done := int64(1_000_000)
	if s := os.Getenv("SNACKLAB_BENCH_DONE"); s != "" {
		done, _ = strconv.ParseInt(s, 10, 64)
	}
	path := filepath.Join(b.TempDir(), "big.db")
	start := time.Now()
	buildBig(b, path, done)
	fi, _ := os.Stat(path)
	b.Logf("built %d done jobs in %s: %.1f MB", done, time.Since(start).Round(time.Millisecond), float64(fi.Size())/1e6)

	q, err := queue.Open(path, queue.Options{ReadOnly: true})
	if err != nil {
		b.Fatal(err)
	}
	defer q.Close()
	w, err := queue.Open(path, queue.Options{BusyTimeout: 10 * time.Second})
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	dash := httptest.NewServer(ops.NewDashboard(q, nil))
	defer dash.Close()
	get := func(url string) error {
		resp, err := dash.Client().Get(url)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		_, err = io.Copy(io.Discard, resp.Body)
		return err
	}
	views := []struct {
		name string
		run  func() error
	}{
		{"(no view: the writer alone, 300 ms)", func() error { time.Sleep(300 * time.Millisecond); return nil }},
		{"stats", func() error { _, err := q.Stats(ctx); return err }},
		{"stats --prom (/metrics)", func() error { return get(dash.URL + "/metrics") }},
		{"dead (all 200, with evidence)", func() error {
			j, err := ops.ListDead(ctx, q, "", nil, time.Now().UnixMilli())
			if err == nil {
				_, err = ops.WithTrails(ctx, q, j)
			}
			return err
		}},
		{"alerts (default: any dead)", func() error {
			zero := int64(0)
			_, err := ops.Evaluate(ctx, q, time.Now().UnixMilli(), ops.Thresholds{MaxDead: &zero})
			return err
		}},
		{"dashboard page", func() error { return get(dash.URL + "/") }},
		{"check (on a snapshot)", func() error {
			_, _, st, err := q.CheckSnapshot(ctx, 20, queue.SnapshotOptions{})
			b.Logf("  check's snapshot: %+v", st)
			return err
		}},
	}
	b.ResetTimer()
	for _, v := range views {
		var times []time.Duration
		var wait time.Duration
		var n int
		for range 3 { // the median of three, the longest wait of all three
			took, w1, n1, err := underWriter(w, v.run)
			if err != nil {
				b.Fatalf("%s: %v", v.name, err)
			}
			times, wait, n = append(times, took), max(wait, w1), n+n1
		}
		slices.Sort(times)
		b.Logf("%-36s median %9s (max %9s)   longest enqueue meanwhile %8s (of %d)", v.name,
			times[1].Round(100*time.Microsecond), times[2].Round(100*time.Microsecond), wait.Round(100*time.Microsecond), n)
	}
}

// underWriter runs view while w enqueues every 5 ms, and returns how long
// the view took, the longest enqueue meanwhile and how many there were.
func underWriter(w *queue.Queue, view func() error) (took, longest time.Duration, n int, err error) {
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var werr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			t := time.Now()
			_, _, err := w.Enqueue(context.Background(), queue.NewJob{ID: fmt.Sprintf("w-%d-%d", t.UnixNano(), i), Qty: 1, MaxAttempts: 3, DeadlineWindowMs: 86_400_000}, t.UnixMilli())
			if err != nil {
				werr = err
				return
			}
			longest = max(longest, time.Since(t))
			n++
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	time.Sleep(20 * time.Millisecond) // the writer under way before the view starts
	t := time.Now()
	err = view()
	took = time.Since(t)
	close(stop)
	wg.Wait()
	if err == nil {
		err = werr
	}
	return took, longest, n, err
}

// buildBig writes a version-5 queue file holding done done jobs, 200 dead
// (with an attempt each) and 100 pending, in one transaction.
func buildBig(b *testing.B, path string, done int64) {
	q, err := queue.Open(path, queue.Options{Create: true})
	if err != nil {
		b.Fatal(err)
	}
	q.Close()
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=synchronous(OFF)")
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	for _, s := range []string{
		"BEGIN",
		// the triggers would add a tally update per row: set the tally once
		"DROP TRIGGER tallies_done_insert",
		`WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ` + strconv.FormatInt(done, 10) + `)
		 INSERT INTO jobs (id, qty, state, attempts, max_attempts, token, available_at, deadline_at, deadline_window_ms, created_at, updated_at, closed_at)
		 SELECT printf('done-%08d', i), 7, 'done', 1, 5, 1, 1000 + i, 86401000 + i, 86400000, 1000 + i, 2000 + i, 2000 + i FROM n`,
		`UPDATE tallies SET n = (SELECT count(*) FROM jobs WHERE state = 'done') WHERE name = 'done'`,
		`WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 200)
		 INSERT INTO jobs (id, qty, state, reason, attempts, max_attempts, token, available_at, deadline_at, deadline_window_ms, created_at, updated_at, closed_at)
		 SELECT printf('dead-%04d', i), 7, 'dead', 'exhausted', 3, 3, 3, 1000 + i, 86401000 + i, 86400000, 1000 + i, 5000 + i, 5000 + i FROM n`,
		`INSERT INTO attempts (job_id, token, attempt, outcome, status, error, at_ms)
		 SELECT id, 3, 3, 'retry', 503, 'http', updated_at FROM jobs WHERE reason IS NOT NULL`,
		`WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 100)
		 INSERT INTO jobs (id, qty, available_at, max_attempts, deadline_at, deadline_window_ms, created_at, updated_at)
		 SELECT printf('pend-%04d', i), 7, 9000000000000, 5, 9000086400000, 86400000, 1000, 1000 FROM n`,
		"CREATE TRIGGER tallies_done_insert AFTER INSERT ON jobs WHEN NEW.state = 'done' BEGIN UPDATE tallies SET n = n + 1 WHERE name = 'done'; END",
		"COMMIT",
	} {
		if _, err := db.Exec(s); err != nil {
			b.Fatalf("%.60s: %v", s, err)
		}
	}
}
