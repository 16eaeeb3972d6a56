package queue_test

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"snacklab/queue"
)

// The queue's costs are meant to be one commit per operation. These three
// benchmarks run on the same disk in the same run, so their ratio says how
// close the queue gets to the floor: compare ns/op of Enqueue and of
// ClaimFinish (two operations) with RawCommit.

// BenchmarkRawCommit is the floor: one INSERT in its own transaction, with the
// queue's pragmas (rollback journal, synchronous=EXTRA).
func BenchmarkRawCommit(b *testing.B) {
	path := filepath.Join(b.TempDir(), "raw.db")
	db, err := sql.Open("sqlite", "file:"+path+"?_journal_mode=DELETE&_synchronous=EXTRA&_txlock=immediate")
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

// changedPages runs op and reports, by b-tree, which database pages it
// changed: the pages a commit writes (twice, in a rollback journal: the old
// content to the journal, the new to the file). Page 1 holds the header's
// change counter, so every commit writes it.
func changedPages(t *testing.T, path string, op func()) map[string]int {
	t.Helper()
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	op()
	after, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	owner := map[int]string{}
	rows, err := db.Query("SELECT name, pageno FROM dbstat")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var name string
		var page int
		if err := rows.Scan(&name, &page); err != nil {
			t.Fatal(err)
		}
		owner[page] = name
	}
	rows.Close()
	const size = 4096
	got := map[string]int{}
	for p := 0; p*size < max(len(before), len(after)); p++ {
		page := func(b []byte) []byte { return b[min(p*size, len(b)):min((p+1)*size, len(b))] }
		if !bytes.Equal(page(before), page(after)) {
			got[owner[p+1]]++
		}
	}
	return got
}

// TestPagesPerOperation logs, with -v, the b-trees each operation writes to,
// and holds the queue to its page budget (docs/performance.md): an enqueue
// writes the header, the row and its entries in jobs_open and jobs_due; a
// claim the header and the row (and, for a job's last attempt, its entry in
// jobs_last_lease); a finish ok the header, the row, the entries it
// leaves, its attempt's row (the evidence) and the done tally (which lets
// stats count without reading every job).
func TestPagesPerOperation(t *testing.T) {
	ctx := context.Background()
	total := func(m map[string]int) (n int) {
		for _, v := range m {
			n += v
		}
		return n
	}
	for _, maxAttempts := range []int64{5, 1} {
		t.Run(fmt.Sprintf("max attempts %d", maxAttempts), func(t *testing.T) {
			q, path := openNew(t)
			for i := range 300 {
				enqueue(t, q, fmt.Sprintf("o-%04d", i), 7, maxAttempts, 3_600_000, t0)
			}
			last := 0 // a last attempt writes one index entry more, in claim and in finish
			if maxAttempts == 1 {
				last = 1
			}
			// Each operation five times; the fewest pages counts, so an
			// occasional b-tree page split does not decide the budget.
			best := map[string]map[string]int{}
			var j queue.Job
			cases := []struct {
				name string
				max  int
				op   func(i int)
			}{
				{"enqueue", 4, func(i int) { enqueue(t, q, fmt.Sprintf("n-%04d", i), 7, maxAttempts, 3_600_000, t0+1) }},
				{"claim", 2 + last, func(int) {
					var err error
					if j, _, err = q.Claim(ctx, "A", t0+1, 30_000); err != nil {
						t.Fatal(err)
					}
				}},
				{"finish ok", 6 + last, func(int) {
					if _, _, err := q.Finish(ctx, j.ID, j.Token, queue.OutcomeOK, t0+1); err != nil {
						t.Fatal(err)
					}
				}},
			}
			for i := range 5 {
				for _, c := range cases {
					got := changedPages(t, path, func() { c.op(i) })
					if b, ok := best[c.name]; !ok || total(got) < total(b) {
						best[c.name] = got
					}
				}
			}
			for _, c := range cases {
				got := best[c.name]
				t.Logf("%-10s %d pages: %v", c.name, total(got), got)
				if total(got) > c.max {
					t.Errorf("%s changed %d pages (%v), want at most %d", c.name, total(got), got, c.max)
				}
			}
		})
	}
}
