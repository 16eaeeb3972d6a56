package queue_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"testing"

	"snacklab/internal/tier"
	"snacklab/queue"
)

// TestRandomOperationsKeepTheInvariants drives the queue with random
// operations on a small set of jobs and checks, after every step, what must
// never happen: a job or its qty lost, a token going backwards, a stale token
// changing anything, a rule of queuectl check broken. The seed is printed so a failure can be replayed with
// SNACKLAB_SEED.
func TestRandomOperationsKeepTheInvariants(t *testing.T) {
	tier.Slow(t)
	seed := uint64(rand.Int64())
	if s := os.Getenv("SNACKLAB_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	rounds := 4
	if testing.Short() {
		rounds = 2
	}
	for r := range rounds {
		seed := seed + uint64(r)
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			checkRandomRun(t, seed, 250)
		})
	}
}

func checkRandomRun(t *testing.T, seed uint64, steps int) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(seed, 0))
	q, _ := openNew(t)
	ids := []string{"a", "b", "c", "d"}
	qty := map[string]int64{}
	last := map[string]queue.Job{}
	now := t0
	snapshot := func() map[string]queue.Job {
		m := map[string]queue.Job{}
		for id := range qty {
			m[id] = get(t, q, id)
		}
		return m
	}
	for step := range steps {
		now += rng.Int64N(3000)
		id := ids[rng.IntN(len(ids))]
		var op string
		var staleFinish bool
		switch rng.IntN(6) {
		case 0:
			op = "enqueue " + id
			n := rng.Int64N(9) + 1
			_, _, err := q.Enqueue(ctx, queue.NewJob{ID: id, Qty: n, MaxAttempts: rng.Int64N(3) + 1, DeadlineWindowMs: rng.Int64N(20_000) + 1}, now)
			if _, known := qty[id]; !known && err == nil {
				qty[id] = n
			}
		case 1, 2:
			op = "claim"
			q.Claim(ctx, "w"+strconv.Itoa(rng.IntN(3)), now, rng.Int64N(4000)+1)
		case 3, 4:
			j, known := last[id]
			if !known {
				continue
			}
			token := max(0, j.Token-rng.Int64N(2)) // sometimes the current token, sometimes an older one
			outcome := []queue.Outcome{queue.OutcomeOK, queue.OutcomeRetry, queue.OutcomePermanent}[rng.IntN(3)]
			op = fmt.Sprintf("finish %s token=%d %s", id, token, outcome)
			staleFinish = j.State != queue.Leased || token != j.Token
			_, applied, err := q.Finish(ctx, id, token, outcome, now)
			if err != nil {
				t.Fatalf("step %d %s: %v", step, op, err)
			}
			if applied == staleFinish {
				t.Fatalf("step %d %s: applied=%v for a job %s with token %d", step, op, applied, j.State, j.Token)
			}
		case 5:
			op = "redrive " + id
			q.Redrive(ctx, id, "T-"+strconv.Itoa(step), now)
		}
		cur := snapshot()
		for id, n := range qty {
			j := cur[id]
			if j.Qty != n || j.ID != id {
				t.Fatalf("step %d %s: job %s = %+v, want qty %d kept", step, op, id, j, n)
			}
			prev, seen := last[id]
			if seen && j.Token < prev.Token {
				t.Fatalf("step %d %s: token of %s went back from %d to %d", step, op, id, prev.Token, j.Token)
			}
			if seen && j.Token > prev.Token+1 {
				t.Fatalf("step %d %s: token of %s jumped from %d to %d", step, op, id, prev.Token, j.Token)
			}
			if (j.State == queue.Leased) != (j.Owner != "") || (j.State == queue.Dead) != (j.Reason != "") {
				t.Fatalf("step %d %s: inconsistent job %+v", step, op, j)
			}
			if staleFinish && seen && j != prev {
				t.Fatalf("step %d %s: a stale finish changed %s: %+v -> %+v", step, op, id, prev, j)
			}
		}
		// The file's own rules, closed_at following state among them
		// (kept by triggers, so only a check of the file sees it).
		if problems, n, err := q.Check(ctx, 5); err != nil || n != 0 {
			t.Fatalf("step %d %s: Check = %v, %d problems, %v", step, op, problems, n, err)
		}
		last = cur
	}
}

// TestConcurrentClaimsNeverShareAJob opens the file through several
// independent handles, as separate processes would, and claims in parallel:
// each job is granted once. (Separate OS processes race in sender's tests
// and in lab step 7.)
func TestConcurrentClaimsNeverShareAJob(t *testing.T) {
	ctx := context.Background()
	q, path := openNew(t)
	const jobs = 40
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
				j, ok, err := h.Claim(ctx, "w"+strconv.Itoa(w), t0, 60_000)
				if err != nil {
					t.Errorf("worker %d: %v", w, err)
					return
				}
				if !ok {
					return
				}
				mu.Lock()
				granted[j.ID]++
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
