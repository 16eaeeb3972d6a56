package sender_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"snacklab/queue"
	"snacklab/sender"
)

const (
	now   = int64(1_700_000_000_000)
	lease = int64(30_000)
)

// openQueue makes a fresh queue file holding the given jobs, each qty 7.
func openQueue(t *testing.T, ids ...string) *queue.Queue {
	t.Helper()
	q, err := queue.Open(filepath.Join(t.TempDir(), "queue.db"), queue.Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.Close() })
	for _, id := range ids {
		if _, _, err := q.Enqueue(context.Background(), queue.NewJob{ID: id, Qty: 7, MaxAttempts: 5, DeadlineWindowMs: 86_400_000}, now); err != nil {
			t.Fatal(err)
		}
	}
	return q
}

// getJob reads one job back, failing the test if it cannot.
func getJob(t *testing.T, q *queue.Queue, id string) queue.Job {
	t.Helper()
	job, err := q.Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return job
}

func newSender(q *queue.Queue, url string, events io.Writer) *sender.Sender {
	return &sender.Sender{
		Queue:   q,
		URL:     url,
		Owner:   "A",
		LeaseMs: lease,
		Timeout: 2 * time.Second,
		Now:     func() int64 { return now },
		Events:  events,
	}
}

// reply answers every request with status and body.
func reply(status int, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		io.WriteString(w, body)
	}
}

// countingServer serves h and counts the requests it saw.
func countingServer(t *testing.T, h http.HandlerFunc) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	n := new(atomic.Int32)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		h(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv, n
}

// closedAddr is the address of a listener that no longer listens, so that
// connecting to it is refused.
func closedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "http://" + addr
}

// hangUp drops the connection without answering; with reset it sends RST.
func hangUp(reset bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		c, _, err := w.(http.Hijacker).Hijack()
		if err != nil {
			panic(err)
		}
		if tc, ok := c.(*net.TCPConn); ok && reset {
			tc.SetLinger(0)
		}
		c.Close()
	}
}

// hold answers only when the client gives up. Reading the body first lets
// the server notice the client hanging up.
func hold(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	<-r.Context().Done()
}

// eventKinds returns the "event" field of each JSON line.
func eventKinds(t *testing.T, out string) []string {
	t.Helper()
	var kinds []string
	for _, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		var e struct{ Event string }
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("event line %q: %v", line, err)
		}
		kinds = append(kinds, e.Event)
	}
	return kinds
}

func TestRunOnceClassification(t *testing.T) {
	retryAt := now + queue.Backoff("o-1", 1)
	for _, tc := range []struct {
		name        string
		handler     http.HandlerFunc // nil: connection refused
		timeout     time.Duration
		wantClass   sender.Class
		wantErr     error // nil, sender.ErrBadAck or sender.ErrUnexpected
		wantState   queue.State
		wantReason  queue.Reason
		wantAvail   int64
		wantStatus  int
		wantHandled bool
	}{
		{"200 ack true", reply(200, `{"ack":true,"duplicate":false,"stock":7}`), 0, sender.ClassOK, nil, queue.Done, "", now, 200, true},
		{"200 ack true spaced", reply(200, " { \"ack\" :\n true } "), 0, sender.ClassOK, nil, queue.Done, "", now, 200, true},
		{"201 ack true", reply(201, `{"ack":true}`), 0, sender.ClassOK, nil, queue.Done, "", now, 201, true},
		{"200 ack 1", reply(200, `{"ack":1}`), 0, sender.ClassBadAck, sender.ErrBadAck, queue.Leased, "", now, 200, true},
		{"200 ack ok", reply(200, `{"ack":"ok"}`), 0, sender.ClassBadAck, sender.ErrBadAck, queue.Leased, "", now, 200, true},
		{"200 ack string true", reply(200, `{"ack":"true"}`), 0, sender.ClassBadAck, sender.ErrBadAck, queue.Leased, "", now, 200, true},
		{"200 ack false", reply(200, `{"ack":false}`), 0, sender.ClassBadAck, sender.ErrBadAck, queue.Leased, "", now, 200, true},
		{"200 ack missing", reply(200, `{"duplicate":false}`), 0, sender.ClassBadAck, sender.ErrBadAck, queue.Leased, "", now, 200, true},
		{"200 ACK upper case", reply(200, `{"ACK":true}`), 0, sender.ClassBadAck, sender.ErrBadAck, queue.Leased, "", now, 200, true},
		{"200 not JSON", reply(200, `ok`), 0, sender.ClassBadAck, sender.ErrBadAck, queue.Leased, "", now, 200, true},
		{"200 empty body", reply(200, ``), 0, sender.ClassBadAck, sender.ErrBadAck, queue.Leased, "", now, 200, true},
		{"200 trailing data", reply(200, `{"ack":true} {"ack":true}`), 0, sender.ClassBadAck, sender.ErrBadAck, queue.Leased, "", now, 200, true},
		{"503", reply(503, `{"ack":false}`), 0, sender.ClassRetryable, nil, queue.Pending, "", retryAt, 503, true},
		{"500", reply(500, ``), 0, sender.ClassRetryable, nil, queue.Pending, "", retryAt, 500, true},
		{"connection refused", nil, 0, sender.ClassRetryable, nil, queue.Pending, "", retryAt, 0, false},
		{"timeout", hold, 100 * time.Millisecond, sender.ClassRetryable, nil, queue.Pending, "", retryAt, 0, true},
		{"closed without answer", hangUp(false), 0, sender.ClassRetryable, nil, queue.Pending, "", retryAt, 0, true},
		{"connection reset", hangUp(true), 0, sender.ClassRetryable, nil, queue.Pending, "", retryAt, 0, true},
		{"404", reply(404, `{"ack":false}`), 0, sender.ClassPermanent, nil, queue.Dead, queue.ReasonPermanent, now, 404, true},
		{"409", reply(409, `{"ack":false,"error":"qty"}`), 0, sender.ClassPermanent, nil, queue.Dead, queue.ReasonPermanent, now, 409, true},
		{"422", reply(422, `{"ack":false}`), 0, sender.ClassPermanent, nil, queue.Dead, queue.ReasonPermanent, now, 422, true},
		{"302", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/elsewhere", http.StatusFound) }, 0, sender.ClassUnexpected, sender.ErrUnexpected, queue.Leased, "", now, 302, true},
		{"304", reply(304, ``), 0, sender.ClassUnexpected, sender.ErrUnexpected, queue.Leased, "", now, 304, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := openQueue(t, "o-1")
			handled := new(atomic.Int32)
			url := closedAddr(t)
			if tc.handler != nil {
				var srv *httptest.Server
				srv, handled = countingServer(t, tc.handler)
				url = srv.URL
			}
			var events bytes.Buffer
			s := newSender(q, url, &events)
			if tc.timeout > 0 {
				s.Timeout = tc.timeout
			}

			res, err := s.RunOnce(context.Background())

			if tc.wantErr == nil && err != nil {
				t.Fatalf("RunOnce: %v", err)
			}
			if tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
				t.Fatalf("RunOnce error = %v, want %v", err, tc.wantErr)
			}
			if got, want := res.Class, tc.wantClass; got != want {
				t.Errorf("class = %q, want %q", got, want)
			}
			if got, want := res.Status, tc.wantStatus; got != want {
				t.Errorf("status = %d, want %d", got, want)
			}
			if got, want := handled.Load() > 0, tc.wantHandled; got != want {
				t.Errorf("server saw the request = %v, want %v", got, want)
			}
			job := getJob(t, q, "o-1")
			if got, want := job.State, tc.wantState; got != want {
				t.Fatalf("state = %s, want %s", got, want)
			}
			if got, want := job.Reason, tc.wantReason; got != want {
				t.Errorf("reason = %q, want %q", got, want)
			}
			if got, want := job.AvailableAt, tc.wantAvail; got != want {
				t.Errorf("available_at = %d, want %d", got, want)
			}
			if got, want := job.Token, int64(1); got != want {
				t.Errorf("token = %d, want %d", got, want)
			}
			if got, want := job.Qty, int64(7); got != want {
				t.Errorf("qty = %d, want %d", got, want)
			}
			wantKinds := "claiming claimed response finished"
			if tc.wantState == queue.Leased {
				wantKinds = "claiming claimed response"
				if got, want := job.Owner, "A"; got != want {
					t.Errorf("owner = %q, want %q", got, want)
				}
				if got, want := job.LeaseUntil, now+lease; got != want {
					t.Errorf("lease_until = %d, want %d", got, want)
				}
			}
			if got, want := strings.Join(eventKinds(t, events.String()), " "), wantKinds; got != want {
				t.Errorf("events = %s, want %s", got, want)
			}
		})
	}
}

func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status int
		body   string
		err    error
		want   sender.Class
	}{
		{"ack true", 200, `{"ack":true}`, nil, sender.ClassOK},
		{"204 no body", 204, ``, nil, sender.ClassBadAck},
		{"ack null", 200, `{"ack":null}`, nil, sender.ClassBadAck},
		{"body null", 200, `null`, nil, sender.ClassBadAck},
		{"body array", 200, `[true]`, nil, sender.ClassBadAck},
		{"body true", 200, `true`, nil, sender.ClassBadAck},
		{"ack nested", 200, `{"ack":{"ack":true}}`, nil, sender.ClassBadAck},
		{"2xx body cut by timeout", 200, `{"ack":tr`, context.DeadlineExceeded, sender.ClassRetryable},
		{"101", 101, ``, nil, sender.ClassUnexpected},
		{"199", 199, `{"ack":true}`, nil, sender.ClassUnexpected},
		{"299 ack true", 299, `{"ack":true}`, nil, sender.ClassOK},
		{"300", 300, `{"ack":true}`, nil, sender.ClassUnexpected},
		{"400", 400, ``, nil, sender.ClassPermanent},
		{"500", 500, ``, nil, sender.ClassRetryable},
		{"301", 301, ``, nil, sender.ClassUnexpected},
		{"600", 600, ``, nil, sender.ClassUnexpected},
		{"499", 499, ``, nil, sender.ClassPermanent},
		{"599", 599, ``, nil, sender.ClassRetryable},
		{"no response, refused", 0, ``, &net.OpError{Op: "dial", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}, sender.ClassRetryable},
		{"no response, other error", 0, ``, errors.New("unsupported protocol scheme"), sender.ClassUnexpected},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got, want := sender.ClassOf(sender.Classify(tc.status, []byte(tc.body), tc.err)), tc.want; got != want {
				t.Errorf("class = %q, want %q", got, want)
			}
		})
	}
}

func TestExitAfterReceiptLeavesJobLeased(t *testing.T) {
	q := openQueue(t, "o-1")
	srv, handled := countingServer(t, reply(200, `{"ack":true}`))
	var events bytes.Buffer
	s := newSender(q, srv.URL, &events)
	hooked := 0
	s.ExitAfterReceipt = func() { hooked++ }

	_, err := s.RunOnce(context.Background())

	if !errors.Is(err, sender.ErrStoppedAfterReceipt) {
		t.Fatalf("RunOnce error = %v, want ErrStoppedAfterReceipt", err)
	}
	if got, want := hooked, 1; got != want {
		t.Errorf("hook calls = %d, want %d", got, want)
	}
	if got, want := handled.Load(), int32(1); got != want {
		t.Errorf("requests = %d, want %d", got, want)
	}
	job := getJob(t, q, "o-1")
	if got, want := job.State, queue.Leased; got != want {
		t.Errorf("state = %s, want %s", got, want)
	}
	if got, want := job.Token, int64(1); got != want {
		t.Errorf("token = %d, want %d", got, want)
	}
	if got, want := strings.Join(eventKinds(t, events.String()), " "), "claiming claimed response"; got != want {
		t.Errorf("events = %s, want %s", got, want)
	}
}

func TestStaleFinish(t *testing.T) {
	q := openQueue(t, "o-1")
	// While A's request is in flight, its lease runs out and B reclaims the job.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, ok, err := q.Claim(r.Context(), "B", now+lease, lease); err != nil || !ok {
			t.Errorf("B's claim: ok=%v err=%v", ok, err)
		}
		reply(200, `{"ack":true}`)(w, r)
	}))
	t.Cleanup(srv.Close)
	var events bytes.Buffer
	s := newSender(q, srv.URL, &events)

	res, err := s.RunOnce(context.Background())

	if !errors.Is(err, sender.ErrStale) {
		t.Fatalf("RunOnce error = %v, want ErrStale", err)
	}
	if res.Applied {
		t.Errorf("applied = true, want false")
	}
	job := getJob(t, q, "o-1")
	if got, want := job.State, queue.Leased; got != want {
		t.Errorf("state = %s, want %s", got, want)
	}
	if got, want := job.Owner, "B"; got != want {
		t.Errorf("owner = %q, want %q", got, want)
	}
	if got, want := job.Token, int64(2); got != want {
		t.Errorf("token = %d, want %d", got, want)
	}
	lines := strings.Split(strings.TrimSpace(events.String()), "\n")
	if got, want := lines[len(lines)-1], `{"event":"finished","id":"o-1","token":1,"class":"ok","applied":false,"state":"leased","reason":null}`; got != want {
		t.Errorf("last event = %s, want %s", got, want)
	}
}

func TestRunDeliversUntilEmpty(t *testing.T) {
	q := openQueue(t, "o-1", "o-2", "o-3")
	srv, handled := countingServer(t, reply(200, `{"ack":true}`))
	var events bytes.Buffer
	s := newSender(q, srv.URL, &events)

	n, err := s.Run(context.Background())

	if err != nil {
		t.Fatal(err)
	}
	if got, want := n, 3; got != want {
		t.Errorf("claimed = %d, want %d", got, want)
	}
	if got, want := handled.Load(), int32(3); got != want {
		t.Errorf("requests = %d, want %d", got, want)
	}
	for _, id := range []string{"o-1", "o-2", "o-3"} {
		job := getJob(t, q, id)
		if got, want := job.State, queue.Done; got != want {
			t.Errorf("%s state = %s, want %s", id, got, want)
		}
	}
	want := strings.Repeat("claiming claimed response finished ", 3) + "claiming empty"
	if got := strings.Join(eventKinds(t, events.String()), " "); got != want {
		t.Errorf("events = %s, want %s", got, want)
	}
}

func TestRunStopsOnBadAck(t *testing.T) {
	q := openQueue(t, "o-1", "o-2")
	srv := httptest.NewServer(reply(200, `{"ack":1}`))
	t.Cleanup(srv.Close)
	s := newSender(q, srv.URL, io.Discard)

	n, err := s.Run(context.Background())

	if !errors.Is(err, sender.ErrBadAck) {
		t.Fatalf("Run error = %v, want ErrBadAck", err)
	}
	if got, want := n, 1; got != want {
		t.Errorf("claimed = %d, want %d", got, want)
	}
	job := getJob(t, q, "o-2")
	if got, want := job.State, queue.Pending; got != want {
		t.Errorf("o-2 state = %s, want %s", got, want)
	}
}

func TestEventText(t *testing.T) {
	for _, tc := range []struct {
		e        sender.Event
		wantJSON string
		wantText string
	}{
		{sender.Event{Kind: "claiming", Owner: "A"}, `{"event":"claiming","owner":"A"}`, "claiming as A"},
		{sender.Event{Kind: "empty"}, `{"event":"empty"}`, "nothing claimable"},
		{sender.Event{Kind: "claimed", ID: "o-1", Qty: 7, Token: 2, Attempt: 2, LeaseUntil: 9},
			`{"event":"claimed","id":"o-1","qty":7,"token":2,"attempt":2,"lease_until":9}`,
			"claimed o-1 qty=7 token=2 attempt=2 lease_until=9"},
		{sender.Event{Kind: "response", ID: "o-1", Token: 1}, `{"event":"response","id":"o-1","token":1,"status":0,"ack":null}`,
			"response o-1 token=1 status=0 ack=none"},
		{sender.Event{Kind: "response", ID: "o-1", Token: 1, Error: "connection refused"},
			`{"event":"response","id":"o-1","token":1,"status":0,"ack":null,"error":"connection refused"}`,
			"response o-1 token=1 status=0 ack=none error=connection refused"},
		{sender.Event{Kind: "finished", ID: "o-1", Token: 1, Class: sender.ClassPermanent, Applied: true, State: queue.Dead, Reason: queue.ReasonPermanent},
			`{"event":"finished","id":"o-1","token":1,"class":"permanent","applied":true,"state":"dead","reason":"permanent"}`,
			"finished o-1 token=1 class=permanent applied=true state=dead reason=permanent"},
	} {
		t.Run(tc.e.Kind, func(t *testing.T) {
			b, err := json.Marshal(tc.e)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := string(b), tc.wantJSON; got != want {
				t.Errorf("JSON = %s, want %s", got, want)
			}
			if got, want := tc.e.String(), tc.wantText; got != want {
				t.Errorf("text = %q, want %q", got, want)
			}
		})
	}
}

func TestTransportError(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{&net.OpError{Op: "dial", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}, "connection refused"},
		{context.DeadlineExceeded, "timeout"},
		{&net.OpError{Op: "read", Err: os.NewSyscallError("read", syscall.ECONNRESET)}, "connection reset"},
		{io.EOF, "connection closed"},
		{errors.New("tls: bad certificate\nmore"), "tls: bad certificate; more"},
	} {
		if got := sender.TransportError(tc.err); got != tc.want {
			t.Errorf("TransportError(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}
