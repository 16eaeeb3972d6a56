package main

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"snacklab/queue"
)

// newSnacklabBatches opens one fresh snacklab queue per batch size in list
// ("8,32,128"): each delivers with queue.ClaimBatch of N jobs and one
// queue.FinishBatch of them, what `sender run --batch N` does around its
// POSTs. A turn is whole batches (the multiple of N at or above turn).
func newSnacklabBatches(dir, list string, turn int) []*system {
	var out []*system
	for _, f := range strings.Split(list, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 || n > queue.MaxBatch {
			must(fmt.Errorf("-batch %q: want sizes 1 to %d", f, queue.MaxBatch))
		}
		s := newSnacklab(filepath.Join(dir, fmt.Sprintf("snacklab-batch-%d.db", n)), fmt.Sprintf("snacklab --batch %d", n), 0)
		s.perTurn = (turn + n - 1) / n * n
		q := s.queue
		s.deliver = func(ctx context.Context, total int) error {
			for done := 0; done < total; {
				start := time.Now()
				jobs, err := q.ClaimBatch(ctx, "bench", t0+1, 30_000, min(n, total-done))
				if err != nil || len(jobs) == 0 {
					return fmt.Errorf("snacklab claim batch: %d jobs, %v", len(jobs), err)
				}
				fs := make([]queue.Finishing, len(jobs))
				for i, j := range jobs {
					fs[i] = queue.Finishing{ID: j.ID, Token: j.Token, Outcome: queue.OutcomeOK}
				}
				res, err := q.FinishBatch(ctx, fs, t0+1)
				if err != nil {
					return fmt.Errorf("snacklab finish batch: %v", err)
				}
				el := time.Since(start)
				for _, r := range res {
					if !r.Applied {
						return fmt.Errorf("snacklab finish batch: %s not applied", r.Job.ID)
					}
					s.lat = append(s.lat, el)
				}
				done += len(jobs)
			}
			return nil
		}
		out = append(out, s)
	}
	return out
}

// latencies is the latency sample of the system named name.
func latencies(ss []*system, name string) []time.Duration {
	for _, s := range ss {
		if s.name == name {
			return s.lat
		}
	}
	return nil
}

// ms is the p-th percentile of l in milliseconds (0 when l is empty).
func ms(l []time.Duration, p int) float64 {
	if len(l) == 0 {
		return 0
	}
	l = slices.Clone(l)
	slices.Sort(l)
	i := min(len(l)-1, (len(l)*p+99)/100-1)
	return float64(l[max(i, 0)].Microseconds()) / 1000
}
