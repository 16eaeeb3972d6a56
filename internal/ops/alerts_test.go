package ops_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"snacklab/internal/ops"
	"snacklab/internal/ops/opstest"
	"snacklab/queue"
)

func ptr[T any](v T) *T { return &v }

func ids(jobs []ops.DeadJob) []string {
	out := []string{}
	for _, j := range jobs {
		out = append(out, j.ID)
	}
	return out
}

func TestListDead(t *testing.T) {
	q, _ := opstest.Known(t)
	// perm-1 died at 2000, so at Now it is exactly 98 s old.
	for _, c := range []struct {
		name      string
		reason    queue.Reason
		olderThan *time.Duration
		want      []string
	}{
		{"all", "", nil, opstest.DeadIDs},
		{"permanent", queue.ReasonPermanent, nil, []string{"perm-1", "perm-2"}},
		{"exhausted", queue.ReasonExhausted, nil, []string{"exh-1", "exh-2", "rd-dead"}},
		{"deadline", queue.ReasonDeadline, nil, []string{"dl-1"}},
		{"older than 0 is every dead job that died before now", "", ptr(time.Duration(0)), opstest.DeadIDs},
		{"exactly at the boundary is not older", "", ptr(98 * time.Second), []string{}},
		{"one ms under the boundary", "", ptr(98*time.Second - time.Millisecond), []string{"perm-1"}},
		{"older than 95s", "", ptr(95 * time.Second), []string{"perm-1", "perm-2", "exh-1"}},
		{"older than 95s and exhausted", queue.ReasonExhausted, ptr(95 * time.Second), []string{"exh-1"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			jobs, err := ops.ListDead(context.Background(), q, c.reason, c.olderThan, opstest.Now)
			if err != nil {
				t.Fatal(err)
			}
			if got := ids(jobs); !slices.Equal(got, c.want) {
				t.Fatalf("got %v, want %v", got, c.want)
			}
		})
	}
	jobs, err := ops.ListDead(context.Background(), q, "", nil, opstest.Now)
	if err != nil {
		t.Fatal(err)
	}
	j := jobs[0]
	if got, want := j, (ops.DeadJob{ID: "perm-1", Reason: queue.ReasonPermanent, Attempts: 1, MaxAttempts: 3, Token: 1, SinceMs: 2000, AgeMs: 98000}); got != want {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	if _, err := ops.ListDead(context.Background(), q, "", ptr(-time.Second), opstest.Now); !errors.Is(err, queue.ErrInvalid) {
		t.Fatalf("negative --older-than: got %v, want ErrInvalid", err)
	}
}

func TestEvaluate(t *testing.T) {
	q, _ := opstest.Known(t)
	type want struct {
		check  string
		reason queue.Reason
		ids    []string
		line   string
	}
	for _, c := range []struct {
		name string
		th   ops.Thresholds
		want []want
	}{
		{"at max dead is fine", ops.Thresholds{MaxDead: ptr(int64(6))}, nil},
		{"over max dead", ops.Thresholds{MaxDead: ptr(int64(5))}, []want{{"max_dead", "", opstest.DeadIDs,
			"ALERT max-dead: 6 dead > 5 (permanent=2 exhausted=3 deadline=1); ids: perm-1(permanent) perm-2(permanent) exh-1(exhausted) exh-2(exhausted) dl-1(deadline) rd-dead(exhausted)"}}},
		{"oldest exactly at max age is fine", ops.Thresholds{MaxOldestAge: ptr(98 * time.Second)}, nil},
		{"oldest 1 ms over max age", ops.Thresholds{MaxOldestAge: ptr(98*time.Second - time.Millisecond)}, []want{{"max_oldest_age", "", []string{"perm-1"},
			"ALERT max-oldest-age: oldest dead perm-1 (permanent) dead for 1m38s > 1m37.999s; ids: perm-1(permanent)"}}},
		{"oldest over a round max age", ops.Thresholds{MaxOldestAge: ptr(time.Minute)}, []want{{"max_oldest_age", "", opstest.DeadIDs,
			"ALERT max-oldest-age: oldest dead perm-1 (permanent) dead for 1m38s > 1m00s; ids: perm-1(permanent) perm-2(permanent) exh-1(exhausted) exh-2(exhausted) dl-1(deadline) rd-dead(exhausted)"}}},
		{"oldest 1 s over a max age in whole seconds", ops.Thresholds{MaxOldestAge: ptr(97 * time.Second)}, []want{{"max_oldest_age", "", []string{"perm-1"},
			"ALERT max-oldest-age: oldest dead perm-1 (permanent) dead for 1m38s > 1m37s; ids: perm-1(permanent)"}}},
		{"ratio exactly at max is fine", ops.Thresholds{MaxRatio: map[queue.Reason]float64{queue.ReasonExhausted: 0.5}}, nil},
		{"ratio over max", ops.Thresholds{MaxRatio: map[queue.Reason]float64{queue.ReasonExhausted: 0.49, queue.ReasonPermanent: 0.5}}, []want{{"max_ratio", queue.ReasonExhausted,
			[]string{"exh-1", "exh-2", "rd-dead"}, "ALERT max-ratio exhausted: 0.500 > 0.49 (3 of 6 dead); ids: exh-1(exhausted) exh-2(exhausted) rd-dead(exhausted)"}}},
		{"all at once, in order", ops.Thresholds{MaxDead: ptr(int64(0)), MaxOldestAge: ptr(time.Duration(0)),
			MaxRatio: map[queue.Reason]float64{queue.ReasonPermanent: 0, queue.ReasonDeadline: 0}}, []want{
			{check: "max_dead", ids: opstest.DeadIDs}, {check: "max_oldest_age", ids: opstest.DeadIDs},
			{check: "max_ratio", reason: queue.ReasonPermanent, ids: []string{"perm-1", "perm-2"}},
			{check: "max_ratio", reason: queue.ReasonDeadline, ids: []string{"dl-1"}},
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := ops.Evaluate(context.Background(), q, opstest.Now, c.th)
			if err != nil {
				t.Fatal(err)
			}
			if g, w := len(got), len(c.want); g != w {
				t.Fatalf("breaches: got %d %+v, want %d", g, got, w)
			}
			for i, w := range c.want {
				b := got[i]
				if b.Check != w.check || b.Reason != w.reason || !slices.Equal(b.IDs, w.ids) || b.MoreIDs != 0 {
					t.Errorf("breach %d: got %s %s %v +%d, want %s %s %v", i, b.Check, b.Reason, b.IDs, b.MoreIDs, w.check, w.reason, w.ids)
				}
				if w.line != "" && b.Message != w.line {
					t.Errorf("breach %d line:\n got %q\nwant %q", i, b.Message, w.line)
				}
				if strings.Contains(b.Message, "qty") || strings.Contains(b.Message, opstest.QtyMarker) || strings.Contains(b.Message, "\n") {
					t.Errorf("breach line carries content or is not one line: %q", b.Message)
				}
			}
		})
	}
}

func TestEvaluateNamesAtMostTenIDs(t *testing.T) {
	q, _ := opstest.NewFile(t)
	all := opstest.DeadBatch(t, q, "x", 15, 1000)
	got, err := ops.Evaluate(context.Background(), q, 2000, ops.Thresholds{MaxDead: ptr(int64(3))})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 {
		t.Fatalf("got %d breaches, want 1", len(got))
	}
	b := got[0]
	if !slices.Equal(b.IDs, all[:ops.MaxAlertIDs]) || b.MoreIDs != 5 {
		t.Fatalf("got ids %v +%d, want %v +5", b.IDs, b.MoreIDs, all[:ops.MaxAlertIDs])
	}
	if !strings.HasSuffix(b.Message, "x-009(exhausted) +5 more") {
		t.Fatalf("line %q: want it to end with the tenth id and +5 more", b.Message)
	}
}

func TestThresholdsInvalid(t *testing.T) {
	q, _ := opstest.NewFile(t)
	for _, c := range []struct {
		name string
		th   ops.Thresholds
	}{
		{"negative dead", ops.Thresholds{MaxDead: ptr(int64(-1))}},
		{"negative age", ops.Thresholds{MaxOldestAge: ptr(-time.Second)}},
		{"ratio over 1", ops.Thresholds{MaxRatio: map[queue.Reason]float64{queue.ReasonPermanent: 1.5}}},
		{"unknown reason", ops.Thresholds{MaxRatio: map[queue.Reason]float64{"oops": 0.5}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if _, err := ops.Evaluate(context.Background(), q, 0, c.th); !errors.Is(err, queue.ErrInvalid) {
				t.Fatalf("got %v, want ErrInvalid", err)
			}
		})
	}
}

func TestParseRatio(t *testing.T) {
	for _, c := range []struct {
		in     string
		reason queue.Reason
		r      float64
		ok     bool
	}{
		{"permanent=0.5", queue.ReasonPermanent, 0.5, true},
		{"deadline=0", queue.ReasonDeadline, 0, true},
		{"exhausted=1", queue.ReasonExhausted, 1, true},
		{"exhausted=1.01", "", 0, false},
		{"exhausted=-0.1", "", 0, false},
		{"exhausted=NaN", "", 0, false},
		{"exhausted", "", 0, false},
		{"gone=0.5", "", 0, false},
	} {
		reason, r, err := ops.ParseRatio(c.in)
		if got, want := err == nil, c.ok; got != want {
			t.Errorf("%q: err %v, want ok=%v", c.in, err, c.ok)
			continue
		}
		if err != nil && !errors.Is(err, queue.ErrInvalid) {
			t.Errorf("%q: got %v, want ErrInvalid", c.in, err)
		}
		if reason != c.reason || r != c.r {
			t.Errorf("%q: got %s=%v, want %s=%v", c.in, reason, r, c.reason, c.r)
		}
	}
}
