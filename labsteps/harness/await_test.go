package harness_test

import (
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"snacklab/labsteps/harness"
	"snacklab/labsteps/result"
	"snacklab/labsteps/systrace"
)

// hangingServer is a loopback HTTP server that reads each request and never
// answers it, until the test ends.
func hangingServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-done:
		}
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { close(done); srv.Close() })
	return "http://" + ln.Addr().String()
}

// Every wait the harness offers the steps, run with a budget nothing can
// meet, ends the step as a wait that ran out (TIMEOUT), never as a wrong
// answer (issue #33): a slow machine must not fail a correct program. A new
// wait belongs in this table.
func TestEveryWaitRunsOutAsTimeout(t *testing.T) {
	t.Parallel()
	bin := t.TempDir()
	// A program that runs, prints nothing and never ends by itself.
	if err := os.WriteFile(filepath.Join(bin, "queuectl"), []byte("#!/bin/sh\nexec sleep 30\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	// One that takes a shared lock on the file it is given and holds it.
	if err := os.WriteFile(filepath.Join(bin, "sharer"), []byte("#!/bin/sh\nexec flock -s \"$1\" sleep 30\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	hanging := hangingServer(t)
	never := func() bool { return false }
	for _, tc := range []struct {
		name   string
		wait   func(h *harness.Harness)
		strace bool // needs strace
	}{
		{"Await", func(h *harness.Harness) {
			h.Await("nothing happens", "something", "a test", never, nil, func() string { return "nothing" })
		}, false},
		{"FakeReceiver.WaitRequest", func(h *harness.Harness) { h.StartFakeReceiver().WaitRequest("x-1", "a test") }, false},
		{"HoldServer.WaitHeld", func(h *harness.Harness) { h.StartHoldServer().WaitHeld(1, "a request is held", "a test") }, false},
		{"HTTP", func(h *harness.Harness) { h.HTTP(http.MethodGet, hanging+"/stock", "") }, false},
		{"HTTP POST", func(h *harness.Harness) { h.HTTP(http.MethodPost, hanging+"/orders", `{"id":"x"}`) }, false},
		{"PostTogether", func(h *harness.Harness) {
			h.ExpectAnswered("answered", "answers", "a test", h.PostTogether(hanging, "/orders", `{"id":"x"}`, 3, "")...)
		}, false},
		{"Proc.WaitLine", func(h *harness.Harness) {
			p := h.Start("q", result.LaneQueuectl, "queuectl", result.NoClock, nil)
			p.WaitLine("q prints a line", func(harness.Line) bool { return true }, "a test")
		}, false},
		{"Proc.Wait", func(h *harness.Harness) {
			h.Start("q", result.LaneQueuectl, "queuectl", result.NoClock, nil).Wait("a test")
		}, false},
		{"Traced.WaitRefused", func(h *harness.Harness) {
			h.StartTraced("q", result.LaneQueuectl, "queuectl", result.NoClock, nil, harness.LockCalls).WaitRefused("q tries the lock", "a test")
		}, true},
		{"Traced.WaitRefused, a lock taken but no write lock tried", func(h *harness.Harness) {
			h.WaitLimit = 2 * time.Second // time to take its shared lock: still running is no answer
			h.StartTraced("q", result.LaneQueuectl, "sharer", result.NoClock, nil, harness.LockCalls, h.DB).WaitRefused("q tries the lock", "a test")
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if err := systrace.Available(); tc.strace && err != nil {
				t.Skip(err)
			}
			l := result.Limits{Wait: 50 * time.Millisecond, Block: 50 * time.Millisecond, Drain: 300 * time.Millisecond, Step: time.Minute}
			ctx, cancel := context.WithTimeout(context.Background(), l.Step)
			defer cancel()
			h := harness.New(ctx, t.TempDir(), bin, l)
			t0 := time.Now()
			problem := h.Do(tc.wait)
			var r result.Result
			h.Record(&r)
			if problem != "" {
				t.Fatalf("problem %q; want none", problem)
			}
			fails := r.Failures()
			if len(fails) != 1 {
				t.Fatalf("got %d failed checks, want 1 (the wait); story:\n%s", len(fails), r.Narrative)
			}
			if got, want := fails[0].TimedOut, true; got != want {
				t.Errorf("%s: TimedOut = %v, want %v (observed: %s)", fails[0].What, got, want, fails[0].Observed)
			}
			if took := time.Since(t0); took > 20*time.Second {
				t.Errorf("the wait took %v; want about its limit of %v", took, l.Wait)
			}
		})
	}
}

// WaitedOut tells the lab's own deadlines from what a program did.
func TestWaitedOut(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Nanosecond)
	defer cancel()
	<-ctx.Done()
	var d net.Dialer
	_, dialErr := d.DialContext(ctx, "tcp", "127.0.0.1:1")
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"a context deadline", ctx.Err(), true},
		{"a dial cut by the deadline", dialErr, true},
		{"ErrWaitedOut wrapped", &net.OpError{Op: "read", Err: harness.ErrWaitedOut}, true},
		{"a reset connection", &net.OpError{Op: "read", Err: os.NewSyscallError("read", syscall.ECONNRESET)}, false},
		{"nil", nil, false},
	} {
		if got := harness.WaitedOut(tc.err); got != tc.want {
			t.Errorf("WaitedOut(%s: %v) = %v, want %v", tc.name, tc.err, got, tc.want)
		}
	}
}
