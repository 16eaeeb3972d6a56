package sender_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"snacklab/queue"
	"snacklab/sender"
)

// TestEvidenceOfAJobThatDied follows one job through a 503, a timeout and a
// BadAck, then the claim that finds its last lease spent: the queue keeps
// all three attempts, each with its status, error class and time.
func TestEvidenceOfAJobThatDied(t *testing.T) {
	ctx := context.Background()
	q := openQueue(t)
	if _, _, err := q.Enqueue(ctx, queue.NewJob{ID: "o-1", Qty: 7, MaxAttempts: 3, DeadlineWindowMs: 86_400_000}, now); err != nil {
		t.Fatal(err)
	}
	var n atomic.Int32
	stop := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch n.Add(1) {
		case 1:
			w.WriteHeader(http.StatusServiceUnavailable)
		case 2:
			select { // no answer: the sender times out
			case <-r.Context().Done():
			case <-stop:
			}
		default:
			io.WriteString(w, `{"ack":"ok"}`)
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(stop) }) // runs first
	var clock atomic.Int64
	clock.Store(now)
	s := newSender(q, srv.URL, io.Discard)
	s.Now = clock.Load
	s.Timeout = 200 * time.Millisecond
	for i, wantErr := range []error{nil, nil, sender.ErrBadAck} {
		if _, err := s.RunOnce(ctx); (wantErr == nil && err != nil) || !errors.Is(err, wantErr) {
			t.Fatalf("attempt %d: RunOnce() error %v, want %v", i+1, err, wantErr)
		}
		clock.Add(120_000) // past any backoff and the lease
	}
	if res, err := s.RunOnce(ctx); err != nil || res.Claimed {
		t.Fatalf("RunOnce() after the last lease ran out = %+v, %v; want nothing claimed", res, err)
	}
	h, err := q.Show(ctx, "o-1")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := h.Job.State, queue.Dead; got != want {
		t.Fatalf("state %s, want %s", got, want)
	}
	want := []queue.Attempt{
		{Token: 1, Attempt: 1, Outcome: queue.OutcomeRetry, Evidence: queue.Evidence{Status: 503, Error: queue.ErrorHTTP}, AtMs: now},
		{Token: 2, Attempt: 2, Outcome: queue.OutcomeRetry, Evidence: queue.Evidence{Error: queue.ErrorTimeout}, AtMs: now + 120_000},
		{Token: 3, Attempt: 3, Outcome: queue.OutcomeUndecided, Evidence: queue.Evidence{Status: 200, Error: queue.ErrorBadAck}, AtMs: now + 240_000},
	}
	if len(h.Attempts) != len(want) {
		t.Fatalf("attempts %+v, want %+v", h.Attempts, want)
	}
	for i := range want {
		if got := h.Attempts[i]; got != want[i] {
			t.Errorf("attempt %d = %+v, want %+v", i+1, got, want[i])
		}
	}
}

func TestEvidenceOf(t *testing.T) {
	for _, c := range []struct {
		name   string
		status int
		err    error
		class  sender.Class
		want   queue.Evidence
	}{
		{"ok", 200, nil, sender.ClassOK, queue.Evidence{Status: 200}},
		{"503", 503, nil, sender.ClassRetryable, queue.Evidence{Status: 503, Error: queue.ErrorHTTP}},
		{"404", 404, nil, sender.ClassPermanent, queue.Evidence{Status: 404, Error: queue.ErrorHTTP}},
		{"302", 302, nil, sender.ClassUnexpected, queue.Evidence{Status: 302, Error: queue.Error3xx}},
		{"badack", 200, nil, sender.ClassBadAck, queue.Evidence{Status: 200, Error: queue.ErrorBadAck}},
		{"timeout", 0, context.DeadlineExceeded, sender.ClassRetryable, queue.Evidence{Error: queue.ErrorTimeout}},
		{"eof", 0, io.EOF, sender.ClassRetryable, queue.Evidence{Error: queue.ErrorClosed}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := sender.EvidenceOf(c.status, c.err, c.class); got != c.want {
				t.Errorf("EvidenceOf(%d, %v, %s) = %+v, want %+v", c.status, c.err, c.class, got, c.want)
			}
		})
	}
}
