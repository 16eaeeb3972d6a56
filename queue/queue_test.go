package queue_test

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	_ "modernc.org/sqlite"

	"snacklab/queue"
)

const t0 = int64(1_000_000) // the injected clock's start, ms

func openNew(t testing.TB) (*queue.Queue, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "queue.db")
	q, err := queue.Open(path, queue.Options{Create: true})
	if err != nil {
		t.Fatalf("Open(create): %v", err)
	}
	t.Cleanup(func() { q.Close() })
	return q, path
}

func enqueue(t testing.TB, q *queue.Queue, id string, qty, maxAttempts, window, now int64) queue.Job {
	t.Helper()
	j, dup, err := q.Enqueue(context.Background(), queue.NewJob{ID: id, Qty: qty, MaxAttempts: maxAttempts, DeadlineWindowMs: window}, now)
	if err != nil || dup {
		t.Fatalf("Enqueue(%s): dup=%v err=%v", id, dup, err)
	}
	return j
}

func claim(t testing.TB, q *queue.Queue, owner string, now, lease int64) (queue.Job, bool) {
	t.Helper()
	j, ok, err := q.Claim(context.Background(), owner, now, lease)
	if err != nil {
		t.Fatalf("Claim(%s, %d): %v", owner, now, err)
	}
	return j, ok
}

func get(t testing.TB, q *queue.Queue, id string) queue.Job {
	t.Helper()
	j, err := q.Get(context.Background(), id)
	if err != nil {
		t.Fatalf("Get(%s): %v", id, err)
	}
	return j
}

// countRows reads the file with a separate connection, the way another process would.
func countRows(t testing.TB, path, table string) int {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRow("SELECT count(*) FROM " + table).Scan(&n); err != nil {
		t.Fatalf("count %s: %v", table, err)
	}
	return n
}

func TestOpenRefusesWhatIsNotAQueue(t *testing.T) {
	dir := t.TempDir()
	garbage := filepath.Join(dir, "garbage.db")
	os.WriteFile(garbage, []byte("these are not the pages you are looking for, not at all, no\n"), 0o644)
	emptySQLite := filepath.Join(dir, "other.db")
	db, _ := sql.Open("sqlite", emptySQLite)
	db.Exec("CREATE TABLE other (x)")
	db.Close()
	future := filepath.Join(dir, "future.db")
	db, _ = sql.Open("sqlite", future)
	db.Exec("CREATE TABLE jobs (x); PRAGMA user_version = 99")
	db.Close()

	for _, tc := range []struct {
		name, path string
		want       error
	}{
		{"missing file", filepath.Join(dir, "missing.db"), queue.ErrMissing},
		{"not SQLite", garbage, queue.ErrNotQueue},
		{"SQLite without the queue schema", emptySQLite, queue.ErrNotQueue},
		{"another schema version", future, queue.ErrNotQueue},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before, _ := os.ReadFile(tc.path)
			_, err := queue.Open(tc.path, queue.Options{})
			if !errors.Is(err, tc.want) {
				t.Fatalf("Open(%s) = %v, want %v", tc.name, err, tc.want)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error is not one line: %q", err)
			}
			after, statErr := os.ReadFile(tc.path)
			if tc.want == queue.ErrMissing {
				if !errors.Is(statErr, os.ErrNotExist) {
					t.Errorf("Open created %s; it must not", tc.path)
				}
				return
			}
			if string(before) != string(after) {
				t.Errorf("Open changed %s", tc.path)
			}
		})
	}
}

func TestOpenUsesRollbackJournal(t *testing.T) {
	q, path := openNew(t)
	mode, err := q.JournalMode(context.Background())
	if got, want := mode, "delete"; err != nil || got != want {
		t.Fatalf("journal_mode = %q (%v), want %q", got, err, want)
	}
	enqueue(t, q, "o-1", 7, 3, 60_000, t0)
	for _, suffix := range []string{"-wal", "-shm", "-journal"} {
		if _, err := os.Stat(path + suffix); err == nil {
			t.Errorf("%s exists after a commit; a rollback journal leaves no side file", path+suffix)
		}
	}
}

func TestEnqueueRefusesBadValuesAndWritesNothing(t *testing.T) {
	long := strings.Repeat("a", 65)
	for _, tc := range []struct {
		name string
		job  queue.NewJob
	}{
		{"empty id", queue.NewJob{ID: "", Qty: 1, MaxAttempts: 1, DeadlineWindowMs: 1}},
		{"id of 65 bytes", queue.NewJob{ID: long, Qty: 1, MaxAttempts: 1, DeadlineWindowMs: 1}},
		{"id with a space", queue.NewJob{ID: "o 1", Qty: 1, MaxAttempts: 1, DeadlineWindowMs: 1}},
		{"non-ASCII id", queue.NewJob{ID: "café", Qty: 1, MaxAttempts: 1, DeadlineWindowMs: 1}},
		{"id starting with a dash", queue.NewJob{ID: "-o", Qty: 1, MaxAttempts: 1, DeadlineWindowMs: 1}},
		{"qty 0", queue.NewJob{ID: "o", Qty: 0, MaxAttempts: 1, DeadlineWindowMs: 1}},
		{"negative qty", queue.NewJob{ID: "o", Qty: -7, MaxAttempts: 1, DeadlineWindowMs: 1}},
		{"qty over the bound", queue.NewJob{ID: "o", Qty: queue.MaxQty + 1, MaxAttempts: 1, DeadlineWindowMs: 1}},
		{"no attempts", queue.NewJob{ID: "o", Qty: 1, MaxAttempts: 0, DeadlineWindowMs: 1}},
		{"no deadline window", queue.NewJob{ID: "o", Qty: 1, MaxAttempts: 1, DeadlineWindowMs: 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q, path := openNew(t)
			_, _, err := q.Enqueue(context.Background(), tc.job, t0)
			if !errors.Is(err, queue.ErrInvalid) {
				t.Fatalf("Enqueue(%+v) = %v, want ErrInvalid", tc.job, err)
			}
			if got := countRows(t, path, "jobs"); got != 0 {
				t.Fatalf("jobs after a refused enqueue = %d, want 0", got)
			}
		})
	}
	q, _ := openNew(t)
	if _, _, err := q.Enqueue(context.Background(), queue.NewJob{ID: strings.Repeat("a", 64), Qty: queue.MaxQty, MaxAttempts: 1, DeadlineWindowMs: 1}, t0); err != nil {
		t.Fatalf("Enqueue at every upper bound: %v", err)
	}
}

func TestEnqueueIsIdempotentAndRefusesConflicts(t *testing.T) {
	q, path := openNew(t)
	first := enqueue(t, q, "o-1", 7, 3, 60_000, t0)
	again, dup, err := q.Enqueue(context.Background(), queue.NewJob{ID: "o-1", Qty: 7, MaxAttempts: 9, DeadlineWindowMs: 5}, t0+10)
	if err != nil || !dup {
		t.Fatalf("repeat Enqueue = dup %v, %v; want duplicate, nil", dup, err)
	}
	if again != first {
		t.Fatalf("repeat changed the job: %+v, want %+v", again, first)
	}
	_, _, err = q.Enqueue(context.Background(), queue.NewJob{ID: "o-1", Qty: 8, MaxAttempts: 3, DeadlineWindowMs: 60_000}, t0)
	if !errors.Is(err, queue.ErrConflict) {
		t.Fatalf("Enqueue with another qty = %v, want ErrConflict", err)
	}
	if got := get(t, q, "o-1"); got != first {
		t.Fatalf("conflict changed the job: %+v", got)
	}
	if got := countRows(t, path, "jobs"); got != 1 {
		t.Fatalf("jobs = %d, want 1", got)
	}
}

func TestClaimBoundaries(t *testing.T) {
	const lease = 500
	q, _ := openNew(t)
	enqueue(t, q, "o-1", 7, 5, 60_000, t0)

	if _, ok := claim(t, q, "A", t0-1, lease); ok {
		t.Fatal("claimed at available_at-1; a job is not due before available_at")
	}
	a, ok := claim(t, q, "A", t0, lease)
	if !ok {
		t.Fatal("nothing claimed at available_at; the instant itself is due")
	}
	if a.State != queue.Leased || a.Owner != "A" || a.LeaseUntil != t0+lease || a.Token != 1 || a.Attempts != 1 {
		t.Fatalf("first claim = %+v, want leased to A until %d with token 1, attempt 1", a, t0+lease)
	}
	if _, ok := claim(t, q, "B", a.LeaseUntil-1, lease); ok {
		t.Fatal("B claimed at lease_until-1; A's lease still holds")
	}
	b, ok := claim(t, q, "B", a.LeaseUntil, lease)
	if !ok {
		t.Fatal("B claimed nothing at lease_until; the expiry instant itself is expired")
	}
	if got, want := b.Token, a.Token+1; got != want {
		t.Fatalf("reclaim token = %d, want %d (exactly one more)", got, want)
	}
	if b.Owner != "B" || b.Attempts != 2 || b.LeaseUntil != a.LeaseUntil+lease {
		t.Fatalf("reclaim = %+v", b)
	}
}

func TestBackingOffJobDoesNotBlockOthers(t *testing.T) {
	q, _ := openNew(t)
	enqueue(t, q, "a-first", 1, 5, 600_000, t0)
	enqueue(t, q, "b-second", 2, 5, 600_000, t0)
	a, _ := claim(t, q, "A", t0, 1000)
	if a.ID != "a-first" {
		t.Fatalf("claimed %s first, want a-first (oldest, then by id)", a.ID)
	}
	a, applied, err := q.Finish(context.Background(), a.ID, a.Token, queue.OutcomeRetry, t0)
	if err != nil || !applied || a.State != queue.Pending || a.AvailableAt <= t0 {
		t.Fatalf("retry = %+v applied=%v err=%v, want pending later than now", a, applied, err)
	}
	b, ok := claim(t, q, "A", t0, 1000)
	if !ok || b.ID != "b-second" {
		t.Fatalf("while a-first backs off, claim = %+v ok=%v, want b-second", b, ok)
	}
	if _, ok := claim(t, q, "A", a.AvailableAt-1, 1000); ok {
		t.Fatal("a-first claimed before its available_at")
	}
	if again, ok := claim(t, q, "A", a.AvailableAt, 1000); !ok || again.ID != "a-first" || again.Token != 2 {
		t.Fatalf("at available_at claim = %+v ok=%v, want a-first with token 2", again, ok)
	}
}

// A holder that vanished had its attempt counted; a reclaim must not grant
// more attempts than the budget, nor hand out a job past its deadline.
func TestReclaimOfSpentJobQuarantinesIt(t *testing.T) {
	ctx := context.Background()
	t.Run("attempts spent", func(t *testing.T) {
		q, _ := openNew(t)
		enqueue(t, q, "o-1", 7, 1, 60_000, t0)
		a, _ := claim(t, q, "A", t0, 500)
		if _, ok := claim(t, q, "B", a.LeaseUntil, 500); ok {
			t.Fatal("reclaimed a job whose only attempt was used")
		}
		j := get(t, q, "o-1")
		if j.State != queue.Dead || j.Reason != queue.ReasonExhausted || j.Token != a.Token || j.Owner != "" || j.LeaseUntil != 0 {
			t.Fatalf("job = %+v, want dead (exhausted) with token %d and no owner", j, a.Token)
		}
		if _, applied, _ := q.Finish(ctx, "o-1", a.Token, queue.OutcomeOK, a.LeaseUntil); applied {
			t.Fatal("A's late finish applied to a quarantined job")
		}
	})
	t.Run("deadline passed", func(t *testing.T) {
		q, _ := openNew(t)
		enqueue(t, q, "o-1", 7, 5, 10_000, t0)
		a, _ := claim(t, q, "A", t0, 20_000)
		if _, ok := claim(t, q, "B", a.LeaseUntil, 500); ok {
			t.Fatal("reclaimed a job past its deadline")
		}
		if j := get(t, q, "o-1"); j.State != queue.Dead || j.Reason != queue.ReasonDeadline {
			t.Fatalf("job = %+v, want dead (deadline)", j)
		}
	})
	t.Run("pending past its deadline", func(t *testing.T) {
		q, _ := openNew(t)
		enqueue(t, q, "o-1", 7, 5, 10_000, t0)
		if _, ok := claim(t, q, "A", t0+10_000-1, 500); !ok {
			t.Fatal("nothing claimed at deadline_at-1")
		}
		q2, _ := openNew(t)
		enqueue(t, q2, "o-1", 7, 5, 10_000, t0)
		if _, ok := claim(t, q2, "A", t0+10_000, 500); ok {
			t.Fatal("claimed at deadline_at; a job is not handed out at its deadline")
		}
		if j := get(t, q2, "o-1"); j.State != queue.Dead || j.Reason != queue.ReasonDeadline {
			t.Fatalf("job = %+v, want dead (deadline)", j)
		}
	})
}

func TestFinishTransitions(t *testing.T) {
	ctx := context.Background()
	const id = "o-1"
	// Each case leases o-1 `attempts` times (finishing earlier grants with
	// retry), then finishes the last grant at `at` with `outcome`.
	b1 := queue.Backoff(id, 1)
	for _, tc := range []struct {
		name        string
		maxAttempts int64
		window      int64 // deadline window from t0
		outcome     queue.Outcome
		wantState   queue.State
		wantReason  queue.Reason
	}{
		{"ok is done", 3, 600_000, queue.OutcomeOK, queue.Done, ""},
		{"permanent is dead", 3, 600_000, queue.OutcomePermanent, queue.Dead, queue.ReasonPermanent},
		{"retry with attempts max-1 used is pending", 2, 600_000, queue.OutcomeRetry, queue.Pending, ""},
		{"retry with attempts max used is exhausted", 1, 600_000, queue.OutcomeRetry, queue.Dead, queue.ReasonExhausted},
		{"retry whose next try is deadline-1 is pending", 3, b1 + 1, queue.OutcomeRetry, queue.Pending, ""},
		{"retry whose next try is the deadline is dead", 3, b1, queue.OutcomeRetry, queue.Dead, queue.ReasonDeadline},
		{"exhausted wins over deadline", 1, b1, queue.OutcomeRetry, queue.Dead, queue.ReasonExhausted},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q, _ := openNew(t)
			enqueue(t, q, id, 7, tc.maxAttempts, tc.window, t0)
			a, _ := claim(t, q, "A", t0, 500)
			j, applied, err := q.Finish(ctx, id, a.Token, tc.outcome, t0)
			if err != nil || !applied {
				t.Fatalf("Finish = applied %v, %v; want applied", applied, err)
			}
			if j.State != tc.wantState || j.Reason != tc.wantReason {
				t.Fatalf("after %s: %s (%s), want %s (%s)", tc.outcome, j.State, j.Reason, tc.wantState, tc.wantReason)
			}
			if j.ID != id || j.Qty != 7 || j.Token != a.Token {
				t.Fatalf("finish changed id, qty or token: %+v", j)
			}
			if j.Owner != "" || j.LeaseUntil != 0 {
				t.Fatalf("finish kept the lease: owner %q lease_until %d", j.Owner, j.LeaseUntil)
			}
			if tc.wantState == queue.Pending && j.AvailableAt != t0+b1 {
				t.Fatalf("available_at = %d, want now + backoff = %d", j.AvailableAt, t0+b1)
			}
			if got := get(t, q, id); got != j {
				t.Fatalf("stored %+v, returned %+v", got, j)
			}
		})
	}
}

func TestFinishWithStaleTokenChangesNothing(t *testing.T) {
	ctx := context.Background()
	q, path := openNew(t)
	enqueue(t, q, "o-1", 7, 5, 600_000, t0)
	a, _ := claim(t, q, "A", t0, 500)
	b, _ := claim(t, q, "B", a.LeaseUntil, 500)
	for _, tc := range []struct {
		name    string
		id      string
		token   int64
		outcome queue.Outcome
	}{
		{"older token ok", "o-1", a.Token, queue.OutcomeOK},
		{"older token permanent", "o-1", a.Token, queue.OutcomePermanent},
		{"older token retry", "o-1", a.Token, queue.OutcomeRetry},
		{"newer token", "o-1", b.Token + 1, queue.OutcomeOK},
		{"token zero", "o-1", 0, queue.OutcomeOK},
		{"unknown id", "nope", 1, queue.OutcomeOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, applied, err := q.Finish(ctx, tc.id, tc.token, tc.outcome, a.LeaseUntil+1)
			if err != nil || applied {
				t.Fatalf("Finish(%s, %d) = applied %v, %v; want not applied", tc.id, tc.token, applied, err)
			}
			if got := get(t, q, "o-1"); got != b {
				t.Fatalf("stale finish changed the job: %+v, want %+v", got, b)
			}
		})
	}
	done, applied, _ := q.Finish(ctx, "o-1", b.Token, queue.OutcomeOK, a.LeaseUntil+1)
	if !applied || done.State != queue.Done {
		t.Fatalf("B's finish = %+v applied %v", done, applied)
	}
	if _, applied, _ := q.Finish(ctx, "o-1", b.Token, queue.OutcomePermanent, a.LeaseUntil+2); applied {
		t.Fatal("a second finish with the same token applied to a done job")
	}
	if got := countRows(t, path, "jobs"); got != 1 {
		t.Fatalf("jobs = %d, want 1", got)
	}
	if _, _, err := q.Finish(ctx, "o-1", b.Token, "maybe", t0); !errors.Is(err, queue.ErrInvalid) {
		t.Fatalf("Finish with outcome maybe = %v, want ErrInvalid", err)
	}
}

// jobIn brings a fresh o-1 into the given state and returns the queue.
func jobIn(t *testing.T, state queue.State) (*queue.Queue, string, queue.Job) {
	t.Helper()
	ctx := context.Background()
	q, path := openNew(t)
	enqueue(t, q, "o-1", 7, 1, 60_000, t0)
	if state == queue.Pending {
		return q, path, get(t, q, "o-1")
	}
	a, _ := claim(t, q, "A", t0, 500)
	switch state {
	case queue.Done:
		q.Finish(ctx, "o-1", a.Token, queue.OutcomeOK, t0+1)
	case queue.Dead:
		q.Finish(ctx, "o-1", a.Token, queue.OutcomeRetry, t0+1)
	}
	j := get(t, q, "o-1")
	if j.State != state {
		t.Fatalf("setup: o-1 is %s, want %s", j.State, state)
	}
	return q, path, j
}

func TestRedriveRefusalsWriteNothing(t *testing.T) {
	for _, tc := range []struct {
		name  string
		state queue.State
		id    string
		note  string
		want  error
	}{
		{"pending", queue.Pending, "o-1", "T-1", queue.ErrRedrivePending},
		{"leased", queue.Leased, "o-1", "T-1", queue.ErrRedriveLeased},
		{"done", queue.Done, "o-1", "T-1", queue.ErrRedriveDone},
		{"unknown id", queue.Dead, "o-2", "T-1", queue.ErrNotFound},
		{"note with a space", queue.Dead, "o-1", "T 1", queue.ErrInvalid},
		{"empty note", queue.Dead, "o-1", "", queue.ErrInvalid},
		{"non-ASCII note", queue.Dead, "o-1", "TICKET-é", queue.ErrInvalid},
		{"control character", queue.Dead, "o-1", "T-1\n", queue.ErrInvalid},
		{"free text", queue.Dead, "o-1", "customer Jane Doe called about her crisps", queue.ErrInvalid},
		{"65 characters", queue.Dead, "o-1", strings.Repeat("T", 65), queue.ErrInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q, path, before := jobIn(t, tc.state)
			_, _, err := q.Redrive(context.Background(), tc.id, tc.note, t0+5)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Redrive = %v, want %v", err, tc.want)
			}
			if got := get(t, q, "o-1"); got != before {
				t.Fatalf("refused redrive changed the job: %+v", got)
			}
			if got := countRows(t, path, "redrives"); got != 0 {
				t.Fatalf("refused redrive wrote %d audit rows", got)
			}
		})
	}
}

func TestRedriveRestartsBudgetNotToken(t *testing.T) {
	ctx := context.Background()
	q, path, dead := jobIn(t, queue.Dead)
	const at = t0 + 100_000
	job, rd, err := q.Redrive(ctx, "o-1", "INC-42/fix", at)
	if err != nil {
		t.Fatal(err)
	}
	want := queue.Redrive{JobID: "o-1", PrevToken: dead.Token, PrevReason: queue.ReasonExhausted, AtMs: at, Note: "INC-42/fix"}
	if rd != want {
		t.Fatalf("audit = %+v, want %+v", rd, want)
	}
	if job.State != queue.Pending || job.Reason != "" || job.Attempts != 0 || job.Token != dead.Token ||
		job.AvailableAt != at || job.DeadlineAt != at+dead.DeadlineWindowMs || job.Qty != 7 {
		t.Fatalf("redriven job = %+v", job)
	}
	h, err := q.Show(ctx, "o-1")
	if err != nil || len(h.Redrives) != 1 || h.Redrives[0] != want {
		t.Fatalf("Show = %+v, %v", h, err)
	}
	if got := countRows(t, path, "redrives"); got != 1 {
		t.Fatalf("redrives = %d, want 1", got)
	}
	c, _ := claim(t, q, "C", at, 500)
	if got, want := c.Token, dead.Token+1; got != want {
		t.Fatalf("token after redrive and claim = %d, want %d; a reused token lets a stale completion land", got, want)
	}
	if _, applied, _ := q.Finish(ctx, "o-1", dead.Token, queue.OutcomeOK, at+1); applied {
		t.Fatal("a completion from before the redrive applied to the new run")
	}
	if j, applied, _ := q.Finish(ctx, "o-1", c.Token, queue.OutcomeOK, at+1); !applied || j.State != queue.Done {
		t.Fatalf("the new holder's finish = %+v applied %v", j, applied)
	}
}

func TestInvestigateRecordsWithoutChanging(t *testing.T) {
	ctx := context.Background()
	q, _, dead := jobIn(t, queue.Dead)
	inv, err := q.Investigate(ctx, "o-1", "INC-7", t0+9)
	if err != nil || inv != (queue.Investigation{JobID: "o-1", AtMs: t0 + 9, Note: "INC-7"}) {
		t.Fatalf("Investigate = %+v, %v", inv, err)
	}
	if got := get(t, q, "o-1"); got != dead {
		t.Fatalf("investigate changed the job: %+v", got)
	}
	if _, err := q.Investigate(ctx, "o-9", "INC-7", t0); !errors.Is(err, queue.ErrNotFound) {
		t.Fatalf("Investigate(unknown) = %v, want ErrNotFound", err)
	}
	if _, err := q.Investigate(ctx, "o-1", "looked at it", t0); !errors.Is(err, queue.ErrInvalid) {
		t.Fatalf("Investigate(free text) = %v, want ErrInvalid", err)
	}
}

// fnv1a64 is written out here so the test does not trust the package's hash.
func fnv1a64(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return h
}

func TestBackoffFollowsTheDocumentedFormula(t *testing.T) {
	for _, id := range []string{"o-1", "o-2", "snack:42"} {
		for attempt := 1; attempt <= 12; attempt++ {
			d := int64(1000) << (attempt - 1)
			if d > 60000 {
				d = 60000
			}
			want := d/2 + int64(fnv1a64(id+":"+strconv.Itoa(attempt))%uint64(d/2+1))
			got := queue.Backoff(id, attempt)
			if got != want {
				t.Fatalf("Backoff(%s, %d) = %d, want %d", id, attempt, got, want)
			}
			if got < d/2 || got > d {
				t.Fatalf("Backoff(%s, %d) = %d, outside [%d, %d]", id, attempt, got, d/2, d)
			}
		}
	}
	if got := queue.Backoff("o-1", 1000); got > queue.BackoffCap {
		t.Fatalf("Backoff at attempt 1000 = %d, over the cap", got)
	}
}

func TestStatsCountsEveryState(t *testing.T) {
	ctx := context.Background()
	q, _ := openNew(t)
	for i, id := range []string{"p", "l", "d", "x1", "x2", "x3"} {
		enqueue(t, q, id, int64(i+1), 1, 600_000, t0)
	}
	grant := func(want string) queue.Job {
		j, ok := claim(t, q, "A", t0, 500)
		if !ok || j.ID != want {
			t.Fatalf("claim = %s, want %s", j.ID, want)
		}
		return j
	}
	j := grant("d")
	q.Finish(ctx, "d", j.Token, queue.OutcomeOK, t0)
	grant("l")
	j = grant("p")
	q.Finish(ctx, "p", j.Token, queue.OutcomeRetry, t0+1) // exhausted (max 1)
	q.Redrive(ctx, "p", "T-1", t0+2)                      // pending again
	j = grant("x1")
	q.Finish(ctx, "x1", j.Token, queue.OutcomePermanent, t0+3)
	j = grant("x2")
	q.Finish(ctx, "x2", j.Token, queue.OutcomeRetry, t0+4)
	q.Investigate(ctx, "x2", "INC-1", t0+7)
	s, err := q.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for st, want := range map[queue.State]int64{queue.Pending: 2, queue.Leased: 1, queue.Done: 1, queue.Dead: 2} {
		if got := s.Counts[st]; got != want {
			t.Errorf("count %s = %d, want %d", st, got, want)
		}
	}
	for r, want := range map[queue.Reason]int64{queue.ReasonPermanent: 1, queue.ReasonExhausted: 1, queue.ReasonDeadline: 0} {
		if got := s.DeadByReason[r]; got != want {
			t.Errorf("dead %s = %d, want %d", r, got, want)
		}
	}
	if s.OldestDead == nil || s.OldestDead.ID != "x1" {
		t.Errorf("oldest dead = %+v, want x1", s.OldestDead)
	}
	if s.LastInvestigationMs != t0+7 || s.Investigations != 1 || s.Redrives != 1 || s.Redriven[queue.Pending] != 1 {
		t.Errorf("stats = %+v", s)
	}
	dead, err := q.ListDead(ctx, queue.ReasonExhausted, queue.AllDead)
	if err != nil || len(dead) != 1 || dead[0].ID != "x2" {
		t.Errorf("ListDead(exhausted) = %+v, %v", dead, err)
	}
	for _, tc := range []struct {
		at   int64
		want int
	}{{t0 + 2, 0}, {t0 + 3, 1}, {t0 + 4, 2}} {
		if dead, _ = q.ListDead(ctx, "", tc.at); len(dead) != tc.want {
			t.Errorf("ListDead(died at or before %d) = %d jobs, want %d (x1 died at t0+3, x2 at t0+4)", tc.at, len(dead), tc.want)
		}
	}
}
