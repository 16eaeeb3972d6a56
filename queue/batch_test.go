package queue_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"

	"snacklab/queue"
)

func ids(jobs []queue.Job) []string {
	out := []string{}
	for _, j := range jobs {
		out = append(out, j.ID)
	}
	return out
}

// A batch grants in Claim's order (available_at, then id), each job with its
// own token+1, attempt+1 and lease; it skips jobs backing off and leases
// still running, takes an expired lease in its place in the order, and stops
// at n or when nothing is claimable.
func TestClaimBatchGrantsInClaimOrder(t *testing.T) {
	ctx := context.Background()
	const now = t0 + 10_000
	for _, tc := range []struct {
		name string
		n    int
		want []string
	}{
		{"one is the first in order: the expired lease", 1, []string{"b-1"}},
		{"three in order", 3, []string{"b-1", "c-0", "d-0"}},
		{"more than claimable takes all that are due", 10, []string{"b-1", "c-0", "d-0", "f-0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q, _ := openNew(t)
			for i, id := range []string{"a-2", "b-1", "c-0", "d-0", "f-0"} {
				enqueue(t, q, id, 1, 5, 600_000, t0+int64(i))
			}
			enqueue(t, q, "e-0", 1, 5, 600_000, t0+50_000)   // not yet due
			running, _ := claim(t, q, "X", t0+5, 60_000)     // a-2: its lease runs past now
			expired, _ := claim(t, q, "X", t0+5, now-(t0+5)) // b-1: its lease ends at now
			if running.ID != "a-2" || expired.ID != "b-1" {
				t.Fatalf("setup claimed %s and %s, want a-2 and b-1", running.ID, expired.ID)
			}
			jobs, err := q.ClaimBatch(ctx, "B", now, 30_000, tc.n)
			if err != nil {
				t.Fatal(err)
			}
			if got := ids(jobs); !slices.Equal(got, tc.want) {
				t.Fatalf("ClaimBatch(%d) granted %v, want %v", tc.n, got, tc.want)
			}
			for _, j := range jobs {
				want := int64(1)
				if j.ID == "b-1" {
					want = 2
				}
				if j.Token != want || j.Attempts != want || j.Owner != "B" || j.LeaseUntil != now+30_000 || j.State != queue.Leased {
					t.Errorf("%s granted as %+v, want token and attempts %d, owner B, lease until %d", j.ID, j, want, now+30_000)
				}
				if got := get(t, q, j.ID); got != j {
					t.Errorf("stored %+v, returned %+v", got, j)
				}
			}
			if got := get(t, q, "a-2"); got != running {
				t.Errorf("the running lease changed: %+v, want %+v", got, running)
			}
		})
	}
}

// ClaimBatch(n) grants what n Claims in a row would, job for job.
func TestClaimBatchIsClaimRepeated(t *testing.T) {
	ctx := context.Background()
	for _, n := range []int{1, 2, 5, 40} {
		t.Run(strconv.Itoa(n), func(t *testing.T) {
			batch, _ := openNew(t)
			single, _ := openNew(t)
			for _, q := range []*queue.Queue{batch, single} {
				for i := range 12 {
					// Some due, some not, one past its deadline (swept).
					enqueue(t, q, fmt.Sprintf("o-%02d", (i*7)%12), 1, 2, 600_000, t0+int64(i%4)*1000)
				}
				enqueue(t, q, "late", 1, 2, 10, t0)
			}
			now := t0 + 2500
			got, err := batch.ClaimBatch(ctx, "A", now, 1000, n)
			if err != nil {
				t.Fatal(err)
			}
			var want []queue.Job
			for range n {
				j, ok := claim(t, single, "A", now, 1000)
				if !ok {
					break
				}
				want = append(want, j)
			}
			if !slices.Equal(got, want) {
				t.Fatalf("ClaimBatch(%d) = %v, %d Claims = %v", n, ids(got), n, ids(want))
			}
			if b, s := get(t, batch, "late"), get(t, single, "late"); b != s || b.Reason != queue.ReasonDeadline {
				t.Fatalf("the sweep left late as %+v, Claim as %+v; want dead (deadline)", b, s)
			}
		})
	}
}

// Nothing claimable: no jobs, no error, and the sweep is committed, with
// the evidence Claim's sweep keeps (the spent lease's attempt, expired).
func TestClaimBatchEmptyStillSweeps(t *testing.T) {
	ctx := context.Background()
	q, _ := openNew(t)
	single, _ := openNew(t)
	for _, q := range []*queue.Queue{q, single} {
		enqueue(t, q, "o-1", 1, 1, 600_000, t0)
		claim(t, q, "A", t0, 1000)
	}
	jobs, err := q.ClaimBatch(ctx, "B", t0+1000, 1000, 8)
	if err != nil || len(jobs) != 0 {
		t.Fatalf("ClaimBatch = %v, %v; want nothing", ids(jobs), err)
	}
	if got := get(t, q, "o-1"); got.State != queue.Dead || got.Reason != queue.ReasonExhausted {
		t.Fatalf("the spent lease is %s (%s), want dead (exhausted)", got.State, got.Reason)
	}
	claim(t, single, "B", t0+1000, 1000)
	b, err1 := q.Show(ctx, "o-1")
	s, err2 := single.Show(ctx, "o-1")
	if err1 != nil || err2 != nil || fmt.Sprint(b.Attempts) != fmt.Sprint(s.Attempts) || len(b.Attempts) != 1 || b.Attempts[0].Outcome != "expired" {
		t.Fatalf("the swept job's attempts after ClaimBatch: %+v (%v); after Claim: %+v (%v); want the same one, expired", b.Attempts, err1, s.Attempts, err2)
	}
}

func TestBatchRefusesBadValuesAndWritesNothing(t *testing.T) {
	ctx := context.Background()
	q, _ := openNew(t)
	enqueue(t, q, "o-1", 1, 5, 600_000, t0)
	a, _ := claim(t, q, "A", t0, 1000)
	for _, n := range []int{0, -1, queue.MaxBatch + 1} {
		if _, err := q.ClaimBatch(ctx, "A", t0, 1000, n); !errors.Is(err, queue.ErrInvalid) {
			t.Errorf("ClaimBatch(n=%d) = %v, want ErrInvalid", n, err)
		}
	}
	ok := queue.Finishing{ID: "o-1", Token: a.Token, Outcome: queue.OutcomeOK}
	for _, tc := range []struct {
		name string
		fs   []queue.Finishing
	}{
		{"empty", nil},
		{"bad outcome after a good one", []queue.Finishing{ok, {ID: "o-1", Token: 1, Outcome: "maybe"}}},
		{"bad id after a good one", []queue.Finishing{ok, {ID: "o 2", Token: 1, Outcome: queue.OutcomeOK}}},
		{"negative token", []queue.Finishing{ok, {ID: "o-2", Token: -1, Outcome: queue.OutcomeOK}}},
		{"bad evidence", []queue.Finishing{ok, {ID: "o-2", Token: 1, Outcome: queue.OutcomeOK, Evidence: queue.Evidence{Status: 99}}}},
		{"too many", slices.Repeat([]queue.Finishing{ok}, queue.MaxBatch+1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := q.FinishBatch(ctx, tc.fs, t0); !errors.Is(err, queue.ErrInvalid) {
				t.Fatalf("FinishBatch = %v, want ErrInvalid", err)
			}
			if got := get(t, q, "o-1"); got != a {
				t.Fatalf("a refused batch changed o-1: %+v, want %+v", got, a)
			}
		})
	}
}

// Each finish of a batch is judged by its own token exactly as Finish judges
// it: mixed outcomes apply side by side; a stale token (the lease ran out
// mid-batch and another sender reclaimed the job), an unknown id or a job no
// longer leased changes nothing for that job and nothing else for the others.
func TestFinishBatchJudgesEachFinishByItsOwnToken(t *testing.T) {
	ctx := context.Background()
	q, _ := openNew(t)
	for i := range 6 {
		enqueue(t, q, fmt.Sprintf("o-%d", i), 1, 3, 600_000, t0+int64(i))
	}
	a, err := q.ClaimBatch(ctx, "A", t0+10, 1000, 6)
	if err != nil || len(a) != 6 {
		t.Fatalf("ClaimBatch = %d jobs, %v", len(a), err)
	}
	// A's leases run out; B reclaims o-0 (token 2), and o-5 is finished by
	// someone holding its token (as if A had finished it once already).
	expiry := a[0].LeaseUntil
	b, _ := claim(t, q, "B", expiry, 1000)
	if b.ID != "o-0" || b.Token != 2 {
		t.Fatalf("B claimed %s token %d, want o-0 token 2", b.ID, b.Token)
	}
	if _, applied, _ := q.Finish(ctx, "o-5", a[5].Token, queue.OutcomeOK, expiry); !applied {
		t.Fatal("setup: finish of o-5 not applied")
	}
	now := expiry + 5
	fs := []queue.Finishing{
		{ID: "o-0", Token: a[0].Token, Outcome: queue.OutcomeOK},        // stale: B holds token 2
		{ID: "o-1", Token: a[1].Token, Outcome: queue.OutcomeOK},        // lease expired, not reclaimed: applies
		{ID: "o-2", Token: a[2].Token, Outcome: queue.OutcomeRetry},     // pending at now + backoff
		{ID: "o-3", Token: a[3].Token, Outcome: queue.OutcomePermanent}, // dead (permanent)
		{ID: "nope", Token: 1, Outcome: queue.OutcomeOK},                // unknown id
		{ID: "o-4", Token: a[4].Token + 1, Outcome: queue.OutcomeOK},    // a token never granted
		{ID: "o-5", Token: a[5].Token, Outcome: queue.OutcomeRetry},     // already done
	}
	before := map[string]queue.Job{"o-0": b, "o-4": get(t, q, "o-4"), "o-5": get(t, q, "o-5")}
	got, err := q.FinishBatch(ctx, fs, now)
	if err != nil || len(got) != len(fs) {
		t.Fatalf("FinishBatch = %d results, %v", len(got), err)
	}
	for i, tc := range []struct {
		applied bool
		state   queue.State
		reason  queue.Reason
	}{
		{false, queue.Leased, ""},
		{true, queue.Done, ""},
		{true, queue.Pending, ""},
		{true, queue.Dead, queue.ReasonPermanent},
		{false, "", ""},
		{false, queue.Leased, ""},
		{false, queue.Done, ""},
	} {
		f, r := fs[i], got[i]
		if r.Applied != tc.applied || r.Job.State != tc.state || r.Job.Reason != tc.reason {
			t.Errorf("%s token %d %s: applied %v, %s (%s); want applied %v, %s (%s)",
				f.ID, f.Token, f.Outcome, r.Applied, r.Job.State, r.Job.Reason, tc.applied, tc.state, tc.reason)
		}
		if want, ok := before[f.ID]; ok && get(t, q, f.ID) != want {
			t.Errorf("%s: a finish not applied changed the job: %+v, want %+v", f.ID, get(t, q, f.ID), want)
		}
		if r.Applied && (r.Job.Owner != "" || r.Job.LeaseUntil != 0 || r.Job.UpdatedAt != now || r.Job != get(t, q, f.ID)) {
			t.Errorf("%s: applied as %+v, stored %+v: want the lease released, updated_at %d", f.ID, r.Job, get(t, q, f.ID), now)
		}
	}
	// A finish not applied writes nothing, its attempt row included (o-0's
	// one row is its expired lease, written by B's reclaim); an applied one
	// records its attempt.
	for id, want := range map[string]int{"o-0": 1, "o-1": 1, "o-4": 0} {
		h, err := q.Show(ctx, id)
		if err != nil || len(h.Attempts) != want || (id == "o-0" && h.Attempts[0].Token != a[0].Token) {
			t.Errorf("%s has attempts %+v (%v), want %d", id, h.Attempts, err, want)
		}
	}
	if j := got[2].Job; j.AvailableAt != now+queue.Backoff("o-2", 1) {
		t.Errorf("o-2 available at %d, want now + backoff = %d", j.AvailableAt, now+queue.Backoff("o-2", 1))
	}
}

// For every outcome and budget, a batch of one leaves the job exactly as
// Finish leaves it.
func TestFinishBatchOfOneIsFinish(t *testing.T) {
	ctx := context.Background()
	const id = "o-1"
	b1 := queue.Backoff(id, 1)
	for _, tc := range []struct {
		name        string
		maxAttempts int64
		window      int64
		outcome     queue.Outcome
	}{
		{"ok", 3, 600_000, queue.OutcomeOK},
		{"permanent", 3, 600_000, queue.OutcomePermanent},
		{"retry with budget", 2, 600_000, queue.OutcomeRetry},
		{"retry exhausted", 1, 600_000, queue.OutcomeRetry},
		{"retry at the deadline", 3, b1, queue.OutcomeRetry},
		{"retry just before the deadline", 3, b1 + 1, queue.OutcomeRetry},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var jobs [2]queue.Job
			var attempts [2][]queue.Attempt
			ev := queue.Evidence{Status: 503, Error: queue.ErrorHTTP}
			for i := range jobs {
				q, _ := openNew(t)
				enqueue(t, q, id, 7, tc.maxAttempts, tc.window, t0)
				a, _ := claim(t, q, "A", t0, 500)
				if i == 0 {
					j, applied, err := q.Finish(ctx, id, a.Token, tc.outcome, t0, ev)
					if err != nil || !applied {
						t.Fatalf("Finish = %v, %v", applied, err)
					}
					jobs[i] = j
				} else {
					out, err := q.FinishBatch(ctx, []queue.Finishing{{ID: id, Token: a.Token, Outcome: tc.outcome, Evidence: ev}}, t0)
					if err != nil || !out[0].Applied {
						t.Fatalf("FinishBatch = %+v, %v", out, err)
					}
					jobs[i] = out[0].Job
				}
				h, err := q.Show(ctx, id)
				if err != nil {
					t.Fatal(err)
				}
				attempts[i] = h.Attempts
			}
			if jobs[0] != jobs[1] {
				t.Fatalf("Finish left %+v, FinishBatch %+v", jobs[0], jobs[1])
			}
			if !slices.Equal(attempts[0], attempts[1]) || len(attempts[1]) != 1 {
				t.Fatalf("Finish kept the attempts %+v, FinishBatch %+v; want one each, the same", attempts[0], attempts[1])
			}
		})
	}
}

// Senders batching through separate handles, as separate processes would,
// never share a job, and each finishes all it claimed.
func TestConcurrentBatchesNeverShareAJob(t *testing.T) {
	ctx := context.Background()
	q, path := openNew(t)
	const jobs = 60
	for i := range jobs {
		enqueue(t, q, fmt.Sprintf("o-%02d", i), 1, 3, 600_000, t0)
	}
	var mu sync.Mutex
	granted := map[string]int{}
	var wg sync.WaitGroup
	for w := range 4 {
		h, err := queue.Open(path, queue.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer h.Close()
		wg.Go(func() {
			for {
				js, err := h.ClaimBatch(ctx, "w"+strconv.Itoa(w), t0, 60_000, 7)
				if err != nil || len(js) == 0 {
					if err != nil {
						t.Errorf("worker %d: %v", w, err)
					}
					return
				}
				fs := []queue.Finishing{}
				for _, j := range js {
					fs = append(fs, queue.Finishing{ID: j.ID, Token: j.Token, Outcome: queue.OutcomeOK})
				}
				out, err := h.FinishBatch(ctx, fs, t0+1)
				mu.Lock()
				for i, j := range js {
					granted[j.ID]++
					if err != nil || !out[i].Applied {
						t.Errorf("worker %d: finish of %s not applied: %v", w, j.ID, err)
					}
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(granted) != jobs {
		t.Fatalf("%d jobs granted, want %d", len(granted), jobs)
	}
	for id, n := range granted {
		if n != 1 {
			t.Errorf("%s granted %d times, want once", id, n)
		}
	}
}
