package receiver_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"snacklab/internal/testbin"
	"snacklab/receiver"
)

// fixedNow is the injected clock: every at_ms in these tests is 1234.
func fixedNow() time.Time { return time.UnixMilli(1234) }

// logSink collects log lines and announces each held order, so a test can
// wait for the commit of a held order without sleeping.
type logSink struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	heldC chan string
}

func newLogSink() *logSink { return &logSink{heldC: make(chan string, 64)} }

func (s *logSink) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if bytes.Contains(p, []byte(`"result":"held"`)) {
		select {
		case s.heldC <- string(p):
		default:
		}
	}
	return s.buf.Write(p)
}

func (s *logSink) lines() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Split(strings.TrimSuffix(s.buf.String(), "\n"), "\n")
}

// waitHeld returns the log line of the next held order, failing the test if
// none is committed within a generous deadline.
func (s *logSink) waitHeld(t *testing.T) string {
	t.Helper()
	select {
	case line := <-s.heldC:
		return line
	case <-time.After(10 * time.Second):
		t.Fatal("no order was held within 10s")
		return ""
	}
}

type fixture struct {
	rcv  *receiver.Receiver
	srv  *httptest.Server
	log  *logSink
	path string
}

// start opens a receiver on a fresh file and serves it; wrap, if not nil,
// wraps the handler (tests use it to see a handler return).
func start(t *testing.T, opts receiver.Options, wrap func(http.Handler) http.Handler) *fixture {
	t.Helper()
	f := &fixture{log: newLogSink(), path: filepath.Join(t.TempDir(), "receiver.db")}
	opts.Log = f.log
	if opts.Now == nil {
		opts.Now = fixedNow
	}
	rcv, err := receiver.Open(f.path, opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	h := rcv.Handler()
	if wrap != nil {
		h = wrap(h)
	}
	f.rcv, f.srv = rcv, httptest.NewServer(h)
	t.Cleanup(func() {
		rcv.ReleaseHeld() // or srv.Close would wait on held responses
		f.srv.Close()
		if err := rcv.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return f
}

// do sends one request and returns the status and the body without its
// trailing newline.
func (f *fixture) do(t *testing.T, method, path, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, f.srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatalf("NewRequest: %v", err)
	}
	resp, err := f.srv.Client().Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read body: %v", err)
	}
	return resp.StatusCode, strings.TrimSuffix(string(b), "\n")
}

func (f *fixture) post(t *testing.T, body string) (int, string) {
	t.Helper()
	return f.do(t, http.MethodPost, "/orders", body)
}

func (f *fixture) setFaults(t *testing.T, body string) string {
	t.Helper()
	status, got := f.do(t, http.MethodPost, "/faults", body)
	if status != http.StatusOK {
		t.Fatalf("POST /faults %s: status %d, body %s", body, status, got)
	}
	return got
}

func (f *fixture) stock(t *testing.T) string {
	t.Helper()
	status, got := f.do(t, http.MethodGet, "/stock", "")
	if status != http.StatusOK {
		t.Fatalf("GET /stock: status %d, body %s", status, got)
	}
	return got
}

func order(id string, qty, token int) string {
	return fmt.Sprintf(`{"id":%q,"qty":%d,"token":%d}`, id, qty, token)
}

// TestContractAnswers walks every row of CONTRACT §5's table in order on one
// receiver; each step sees the state the earlier ones left.
func TestContractAnswers(t *testing.T) {
	f := start(t, receiver.Options{}, nil)
	steps := []struct {
		name, method, path, body string
		status                   int
		want                     string // whole body, or a substring if contains
		contains                 bool
	}{
		{"new order", "POST", "/orders", order("o-1", 7, 2), 200, `{"ack":true,"duplicate":false,"stock":7}`, false},
		{"same id same qty", "POST", "/orders", order("o-1", 7, 3), 200, `{"ack":true,"duplicate":true,"stock":7}`, false},
		{"same id other qty", "POST", "/orders", order("o-1", 8, 3), 409, `"ack":false,"error":"order o-1 already recorded with qty 7, not 8"`, true},
		{"malformed", "POST", "/orders", `{"id":"o-1","qty":7}`, 400, `"ack":false,"error":"malformed order: missing field \"token\""`, true},
		{"second order", "POST", "/orders", order("o-2", 5, 1), 200, `{"ack":true,"duplicate":false,"stock":12}`, false},
		{"stock", "GET", "/stock", "", 200, `{"stock":12,"orders":2,"requests":{"o-1":4,"o-2":1}}`, false},
		{"order", "GET", "/orders/o-1", "", 200, `{"id":"o-1","qty":7,"token":2,"requests":4}`, false},
		{"unknown order", "GET", "/orders/o-9", "", 404, `"ack":false,"error":"no such order o-9"`, true},
		{"invalid order id", "GET", "/orders/-x", "", 404, `"ack":false`, true},
		{"faults", "POST", "/faults", `{"fail_next":1,"reject_ids":["r-2","r-1","r-1"],"loose_ack":"ok","hold_next":0}`, 200,
			`{"fail_next":1,"reject_ids":["r-1","r-2"],"loose_ack":"ok","hold_next":0}`, false},
		{"faults absent fields unchanged", "POST", "/faults", `{"loose_ack":""}`, 200,
			`{"fail_next":1,"reject_ids":["r-1","r-2"],"loose_ack":"","hold_next":0}`, false},
		{"stock unchanged by faults", "GET", "/stock", "", 200, `{"stock":12,"orders":2,"requests":{"o-1":4,"o-2":1}}`, false},
	}
	for _, s := range steps {
		status, got := f.do(t, s.method, s.path, s.body)
		if status != s.status {
			t.Fatalf("%s: status=%d, want %d (body %s)", s.name, status, s.status, got)
		}
		if s.contains && !strings.Contains(got, s.want) {
			t.Fatalf("%s: body=%s, want it to contain %s", s.name, got, s.want)
		}
		if !s.contains && got != s.want {
			t.Fatalf("%s: body=%s, want %s", s.name, got, s.want)
		}
	}
}

// TestMalformed checks that each malformed body is refused with a reason
// naming the fault, adds nothing, and counts a request only when the body
// was one object with a valid id.
func TestMalformed(t *testing.T) {
	tests := []struct {
		name    string
		body    string
		reason  string
		counted string // id whose request count must be 1, or ""
	}{
		{"empty", ``, "body is empty", ""},
		{"not json", `id=o-1&qty=7`, "body is not JSON", ""},
		{"truncated", `{"id":"o-1","qty":7`, "body is not JSON", ""},
		{"array", `[{"id":"o-1","qty":7,"token":1}]`, "must be a JSON object", ""},
		{"null", `null`, "must be a JSON object", ""},
		{"two objects", order("o-1", 7, 1) + order("o-1", 7, 1), "exactly one JSON object", ""},
		{"trailing garbage", order("o-1", 7, 1) + `x`, "exactly one JSON object", ""},
		{"duplicate key", `{"id":"o-1","id":"o-2","qty":7,"token":1}`, `duplicate field "id"`, ""},
		{"unknown field", `{"id":"o-1","qty":7,"token":1,"note":"x"}`, `unknown field "note"`, "o-1"},
		{"miscased key", `{"ID":"o-1","qty":7,"token":1}`, `unknown field "ID"`, ""},
		{"missing id", `{"qty":7,"token":1}`, `missing field "id"`, ""},
		{"missing qty", `{"id":"o-1","token":1}`, `missing field "qty"`, "o-1"},
		{"missing token", `{"id":"o-1","qty":7}`, `missing field "token"`, "o-1"},
		{"id empty", order("", 7, 1), "id must be", ""},
		{"id leading dot", order(".o", 7, 1), "id must be", ""},
		{"id space", order("o 1", 7, 1), "id must be", ""},
		{"id non-ascii", order("o-é", 7, 1), "id must be", ""},
		{"id too long", order(strings.Repeat("a", 65), 7, 1), "id must be", ""},
		{"id number", `{"id":1,"qty":7,"token":1}`, "id must be", ""},
		{"id null", `{"id":null,"qty":7,"token":1}`, "id must be", ""},
		{"qty zero", order("o-1", 0, 1), "qty must be an integer from 1 to 1000000", "o-1"},
		{"qty too big", order("o-1", 1000001, 1), "qty must be", "o-1"},
		{"qty negative", order("o-1", -7, 1), "qty must be", "o-1"},
		{"qty float", `{"id":"o-1","qty":7.0,"token":1}`, "qty must be", "o-1"},
		{"qty exponent", `{"id":"o-1","qty":7e0,"token":1}`, "qty must be", "o-1"},
		{"qty string", `{"id":"o-1","qty":"7","token":1}`, "qty must be", "o-1"},
		{"qty null", `{"id":"o-1","qty":null,"token":1}`, "qty must be", "o-1"},
		{"token negative", order("o-1", 7, -1), "token must be an integer >= 0", "o-1"},
		{"token overflow", `{"id":"o-1","qty":7,"token":9223372036854775808}`, "token must be", "o-1"},
		{"token bool", `{"id":"o-1","qty":7,"token":true}`, "token must be", "o-1"},
		{"too big", `{"id":"o-1","qty":7,"token":1,"pad":"` + strings.Repeat("x", receiver.MaxBody) + `"}`, "body larger than 4096 bytes", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := start(t, receiver.Options{}, nil)
			status, got := f.post(t, tt.body)
			if status != http.StatusBadRequest {
				t.Fatalf("status=%d, want 400 (body %s)", status, got)
			}
			if !strings.Contains(got, `"ack":false`) || !strings.Contains(got, jsonQuoteInner(tt.reason)) {
				t.Fatalf("body=%s, want ack false and reason %q", got, tt.reason)
			}
			want := `{"stock":0,"orders":0,"requests":{}}`
			if tt.counted != "" {
				want = fmt.Sprintf(`{"stock":0,"orders":0,"requests":{%q:1}}`, tt.counted)
			}
			if got, want := f.stock(t), want; got != want {
				t.Fatalf("stock=%s, want %s", got, want)
			}
			if got, want := f.log.lines()[0], `"result":"invalid","status":400`; !strings.Contains(got, want) {
				t.Fatalf("log=%s, want it to contain %s", got, want)
			}
		})
	}
}

// TestBoundsAccepted is TestMalformed's other side: the extreme values the
// contract allows are applied.
func TestBoundsAccepted(t *testing.T) {
	f := start(t, receiver.Options{}, nil)
	long := strings.Repeat("a", receiver.MaxIDLen)
	for i, s := range []struct {
		body, want string
	}{
		{order("o-1", receiver.MinQty, 0), `{"ack":true,"duplicate":false,"stock":1}`},
		{order(long, receiver.MaxQty, 1), `{"ack":true,"duplicate":false,"stock":1000001}`},
		{order("A.b_c:d-9", 1, 1), `{"ack":true,"duplicate":false,"stock":1000002}`},
	} {
		if status, got := f.post(t, s.body); status != http.StatusOK || got != s.want {
			t.Fatalf("step %d %s: %d %s, want 200 %s", i, s.body, status, got, s.want)
		}
	}
}

// jsonQuoteInner renders s as it appears inside a JSON string.
func jsonQuoteInner(s string) string {
	b, _ := json.Marshal(s)
	return string(b[1 : len(b)-1])
}

// TestRequestsCounted checks that every POST with a parseable id counts,
// whatever the answer, and that only the applied one moves stock.
func TestRequestsCounted(t *testing.T) {
	f := start(t, receiver.Options{}, nil)
	steps := []struct {
		faults string
		body   string
		status int
	}{
		{"", order("o-1", 7, 1), 200},
		{"", order("o-1", 7, 2), 200},
		{"", order("o-1", 9, 2), 409},
		{`{"fail_next":1}`, order("o-1", 7, 3), 503},
		{`{"reject_ids":["o-1"]}`, order("o-1", 7, 3), 422},
		{`{"reject_ids":[]}`, order("o-1", 0, 3), 400},
		{"", `{"id":"o-1","qty":7,"token":3,"extra":1}`, 400},
		{"", order("o-1", 7, 4), 200},
	}
	for i, s := range steps {
		if s.faults != "" {
			f.setFaults(t, s.faults)
		}
		if status, got := f.post(t, s.body); status != s.status {
			t.Fatalf("step %d: status=%d, want %d (body %s)", i, status, s.status, got)
		}
	}
	if got, want := f.stock(t), `{"stock":7,"orders":1,"requests":{"o-1":8}}`; got != want {
		t.Fatalf("stock=%s, want %s", got, want)
	}
}

// TestLog checks the per-request log line, with the injected clock.
func TestLog(t *testing.T) {
	f := start(t, receiver.Options{Faults: receiver.Faults{RejectIDs: []string{"r-1"}}}, nil)
	f.post(t, order("o-1", 7, 2))
	f.post(t, order("o-1", 7, 3))
	f.post(t, order("o-1", 8, 3))
	f.post(t, order("r-1", 1, 1))
	f.post(t, `{`)
	f.setFaults(t, `{"fail_next":1}`)
	f.post(t, order("o-2", 1, 1))
	want := []string{
		`{"event":"request","id":"o-1","qty":7,"token":2,"result":"applied","status":200,"at_ms":1234}`,
		`{"event":"request","id":"o-1","qty":7,"token":3,"result":"duplicate","status":200,"at_ms":1234}`,
		`{"event":"request","id":"o-1","qty":8,"token":3,"result":"conflict","status":409,"at_ms":1234}`,
		`{"event":"request","id":"r-1","qty":1,"token":1,"result":"rejected","status":422,"at_ms":1234}`,
		`{"event":"request","id":"","qty":0,"token":0,"result":"invalid","status":400,"at_ms":1234}`,
		`{"event":"request","id":"o-2","qty":1,"token":1,"result":"failed","status":503,"at_ms":1234}`,
	}
	got := f.log.lines()
	if len(got) != len(want) {
		t.Fatalf("log has %d lines, want %d:\n%s", len(got), len(want), strings.Join(got, "\n"))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("log line %d=%s, want %s", i, got[i], want[i])
		}
	}
}

// TestReopen checks that orders, stock and counts are on disk, not in memory.
func TestReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "receiver.db")
	serve := func(fn func(f *fixture)) {
		rcv, err := receiver.Open(path, receiver.Options{})
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		f := &fixture{rcv: rcv, srv: httptest.NewServer(rcv.Handler())}
		fn(f)
		f.srv.Close()
		if err := rcv.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
	}
	serve(func(f *fixture) {
		if status, got := f.post(t, order("o-1", 7, 1)); status != 200 {
			t.Fatalf("first post: status=%d body=%s", status, got)
		}
	})
	serve(func(f *fixture) {
		if got, want := f.stock(t), `{"stock":7,"orders":1,"requests":{"o-1":1}}`; got != want {
			t.Fatalf("stock after reopen=%s, want %s", got, want)
		}
		if _, got := f.post(t, order("o-1", 7, 2)); got != `{"ack":true,"duplicate":true,"stock":7}` {
			t.Fatalf("post after reopen=%s, want a duplicate", got)
		}
	})
}

// TestConcurrentSameID races many deliveries of one order; stock must move
// exactly once and every request must be counted.
func TestConcurrentSameID(t *testing.T) {
	const n = 32
	f := start(t, receiver.Options{}, nil)
	var wg sync.WaitGroup
	bodies := make([]string, n)
	statuses := make([]int, n)
	for i := range n {
		wg.Go(func() {
			req, _ := http.NewRequest(http.MethodPost, f.srv.URL+"/orders", strings.NewReader(order("o-1", 7, i)))
			resp, err := f.srv.Client().Do(req)
			if err != nil {
				t.Errorf("post %d: %v", i, err)
				return
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			statuses[i], bodies[i] = resp.StatusCode, strings.TrimSpace(string(b))
		})
	}
	wg.Wait()
	applied := 0
	for i := range n {
		if statuses[i] != 200 {
			t.Fatalf("post %d: status=%d body=%s", i, statuses[i], bodies[i])
		}
		if bodies[i] == `{"ack":true,"duplicate":false,"stock":7}` {
			applied++
		} else if bodies[i] != `{"ack":true,"duplicate":true,"stock":7}` {
			t.Fatalf("post %d: body=%s", i, bodies[i])
		}
	}
	if got, want := applied, 1; got != want {
		t.Fatalf("applied=%d, want %d", got, want)
	}
	if got, want := f.stock(t), `{"stock":7,"orders":1,"requests":{"o-1":32}}`; got != want {
		t.Fatalf("stock=%s, want %s", got, want)
	}
}

// TestFaultModes exercises each fault on a fresh receiver.
func TestFaultModes(t *testing.T) {
	type step struct {
		body, want string
		status     int
	}
	tests := []struct {
		name   string
		faults receiver.Faults
		steps  []step
		stock  string
	}{
		{"fail_next", receiver.Faults{FailNext: 2}, []step{
			{order("o-1", 7, 1), `{"ack":false,"error":"fail_next fault: try again"}`, 503},
			{`garbage`, `{"ack":false,"error":"fail_next fault: try again"}`, 503},
			{order("o-1", 7, 2), `{"ack":true,"duplicate":false,"stock":7}`, 200},
		}, `{"stock":7,"orders":1,"requests":{"o-1":2}}`},
		{"reject_ids", receiver.Faults{RejectIDs: []string{"bad-1"}}, []step{
			{order("bad-1", 7, 1), `{"ack":false,"error":"order bad-1 rejected by reject_ids fault"}`, 422},
			{order("o-1", 7, 1), `{"ack":true,"duplicate":false,"stock":7}`, 200},
		}, `{"stock":7,"orders":1,"requests":{"bad-1":1,"o-1":1}}`},
		{"loose_ack 1", receiver.Faults{LooseAck: "1"}, []step{
			{order("o-1", 7, 1), `{"ack":1,"duplicate":false,"stock":7}`, 200},
			{order("o-1", 7, 2), `{"ack":1,"duplicate":true,"stock":7}`, 200},
			{order("o-1", 6, 2), `{"ack":false,"error":"order o-1 already recorded with qty 7, not 6"}`, 409},
		}, `{"stock":7,"orders":1,"requests":{"o-1":3}}`},
		{"loose_ack ok", receiver.Faults{LooseAck: "ok"}, []step{
			{order("o-1", 7, 1), `{"ack":"ok","duplicate":false,"stock":7}`, 200},
		}, `{"stock":7,"orders":1,"requests":{"o-1":1}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := start(t, receiver.Options{Faults: tt.faults}, nil)
			for i, s := range tt.steps {
				status, got := f.post(t, s.body)
				if status != s.status || got != s.want {
					t.Fatalf("step %d: %d %s, want %d %s", i, status, got, s.status, s.want)
				}
			}
			if got := f.stock(t); got != tt.stock {
				t.Fatalf("stock=%s, want %s", got, tt.stock)
			}
		})
	}
}

// TestFaultsEndpointRefuses checks that a bad POST /faults changes nothing.
func TestFaultsEndpointRefuses(t *testing.T) {
	tests := []struct{ name, body, reason string }{
		{"unknown field", `{"fail_nxt":1}`, "unknown field"},
		{"negative", `{"hold_next":-1}`, "hold_next must be"},
		{"loose ack", `{"loose_ack":"yes"}`, "loose_ack must be"},
		{"bad reject id", `{"reject_ids":["a b"]}`, "not a valid order id"},
		{"wrong type", `{"fail_next":"1"}`, "cannot unmarshal"},
		{"null", `null`, "must be a JSON object"},
		{"two objects", `{}{}`, "exactly one JSON object"},
		{"not json", `fail_next=1`, "invalid character"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := start(t, receiver.Options{Faults: receiver.Faults{FailNext: 3, RejectIDs: []string{"x"}}}, nil)
			status, got := f.do(t, http.MethodPost, "/faults", tt.body)
			if status != http.StatusBadRequest || !strings.Contains(got, tt.reason) {
				t.Fatalf("POST /faults %s: %d %s, want 400 naming %q", tt.body, status, got, tt.reason)
			}
			cur := f.rcv.Faults()
			if got, want := fmt.Sprint(cur), fmt.Sprint(receiver.Faults{FailNext: 3, RejectIDs: []string{"x"}}); got != want {
				t.Fatalf("faults=%s, want %s", got, want)
			}
		})
	}
}

// TestSetFaults checks the Go API's validation.
func TestSetFaults(t *testing.T) {
	f := start(t, receiver.Options{}, nil)
	bad := []receiver.Faults{
		{FailNext: -1}, {HoldNext: -1}, {FailNext: 1000001}, {HoldNext: 1000001},
		{LooseAck: "true"}, {RejectIDs: []string{""}},
	}
	for _, b := range bad {
		if err := f.rcv.SetFaults(b); !errors.Is(err, receiver.ErrInvalid) {
			t.Fatalf("SetFaults(%+v)=%v, want ErrInvalid", b, err)
		}
	}
	if err := f.rcv.SetFaults(receiver.Faults{FailNext: 1000000, HoldNext: 1000000}); err != nil {
		t.Fatalf("SetFaults at the counters' upper bound: %v", err)
	}
	if err := f.rcv.SetFaults(receiver.Faults{HoldNext: 2, RejectIDs: []string{"b", "a"}}); err != nil {
		t.Fatalf("SetFaults: %v", err)
	}
	if got, want := f.setFaults(t, `{}`), `{"fail_next":0,"reject_ids":["a","b"],"loose_ack":"","hold_next":2}`; got != want {
		t.Fatalf("faults=%s, want %s", got, want)
	}
}

// watchHeader marks the request whose handler a test watches.
const watchHeader = "X-Test-Watch"

// handlerDone wraps a handler and reports the return, panics included, of
// each request that carries watchHeader.
func handlerDone(done chan<- struct{}) func(http.Handler) http.Handler {
	return func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get(watchHeader) != "" {
				defer func() { done <- struct{}{} }()
			}
			h.ServeHTTP(w, r)
		})
	}
}

// postWatched posts body with watchHeader set and sends the outcome to errc:
// an error, or a complaint that a held request was answered.
func postWatched(ctx context.Context, f *fixture, body string, errc chan<- error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, f.srv.URL+"/orders", strings.NewReader(body))
	req.Header.Set(watchHeader, "1")
	resp, err := f.srv.Client().Do(req)
	if err == nil {
		resp.Body.Close()
		err = fmt.Errorf("held request answered %d", resp.StatusCode)
	}
	errc <- err
}

// waitDone fails the test unless a handler returns within the deadline.
func waitDone(t *testing.T, done <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: handler still running after 10s", what)
	}
}

// TestHoldNext checks that a held order is committed while its response is
// held, that only new orders are held, and that the hold ends when the
// client goes away.
func TestHoldNext(t *testing.T) {
	done := make(chan struct{}, 16)
	f := start(t, receiver.Options{Faults: receiver.Faults{HoldNext: 1}}, handlerDone(done))

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go postWatched(ctx, f, order("o-1", 7, 1), errc)
	if got, want := f.log.waitHeld(t), `{"event":"request","id":"o-1","qty":7,"token":1,"result":"held","status":0,"at_ms":1234}`+"\n"; got != want {
		t.Fatalf("held log=%q, want %q", got, want)
	}

	// The first response is still held; the order must already be on disk.
	if got, want := f.stock(t), `{"stock":7,"orders":1,"requests":{"o-1":1}}`; got != want {
		t.Fatalf("stock while held=%s, want %s", got, want)
	}
	if status, got := f.post(t, order("o-1", 7, 2)); status != 200 || got != `{"ack":true,"duplicate":true,"stock":7}` {
		t.Fatalf("redelivery while held: %d %s, want a 200 duplicate", status, got)
	}
	if status, got := f.post(t, order("o-2", 1, 1)); status != 200 || got != `{"ack":true,"duplicate":false,"stock":8}` {
		t.Fatalf("next new order: %d %s, want it answered (hold_next was 1)", status, got)
	}
	select {
	case err := <-errc:
		t.Fatalf("held request finished early: %v", err)
	case <-done:
		t.Fatal("held handler returned early")
	default:
	}

	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("held request error=%v, want context.Canceled", err)
	}
	waitDone(t, done, "held request after the client went away")
}

// TestHoldReleasedOnShutdown checks that ReleaseHeld drops a held response's
// connection, as a killed process would, after the order was committed.
func TestHoldReleasedOnShutdown(t *testing.T) {
	done := make(chan struct{}, 16)
	f := start(t, receiver.Options{Faults: receiver.Faults{HoldNext: 1}}, handlerDone(done))
	errc := make(chan error, 1)
	go postWatched(context.Background(), f, order("o-1", 7, 1), errc)
	f.log.waitHeld(t)
	f.rcv.ReleaseHeld()
	waitDone(t, done, "held request after ReleaseHeld")
	if err := <-errc; err == nil || errors.Is(err, context.Canceled) {
		t.Fatalf("held request error=%v, want a dropped connection", err)
	}
	if got, want := f.stock(t), `{"stock":7,"orders":1,"requests":{"o-1":1}}`; got != want {
		t.Fatalf("stock=%s, want %s", got, want)
	}
}

// TestOpenRefuses checks that Open refuses bad options and foreign files
// and leaves those files as they were.
func TestOpenRefuses(t *testing.T) {
	dir := t.TempDir()
	garbage := filepath.Join(dir, "garbage.db")
	garbageBytes := bytes.Repeat([]byte("not a database, just snacks\n"), 200)
	if err := os.WriteFile(garbage, garbageBytes, 0o644); err != nil {
		t.Fatal(err)
	}
	foreign := filepath.Join(dir, "foreign.db")
	db, err := sql.Open("sqlite", foreign)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("CREATE TABLE jobs (id TEXT PRIMARY KEY); PRAGMA user_version = 1"); err != nil {
		t.Fatal(err)
	}
	db.Close()
	foreignBytes, err := os.ReadFile(foreign)
	if err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name string
		path string
		opts receiver.Options
		want error
		same []byte // the file's bytes afterwards, or nil if it must not exist
	}{
		{"garbage", garbage, receiver.Options{}, receiver.ErrNotDatabase, garbageBytes},
		{"foreign sqlite", foreign, receiver.Options{}, receiver.ErrNotDatabase, foreignBytes},
		{"empty path", "", receiver.Options{}, receiver.ErrInvalid, nil},
		{"negative busy", filepath.Join(dir, "a.db"), receiver.Options{BusyTimeout: -1}, receiver.ErrInvalid, nil},
		{"bad fault", filepath.Join(dir, "b.db"), receiver.Options{Faults: receiver.Faults{LooseAck: "yes"}}, receiver.ErrInvalid, nil},
		{"bad reject id", filepath.Join(dir, "c.db"), receiver.Options{Faults: receiver.Faults{RejectIDs: []string{"a b"}}}, receiver.ErrInvalid, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rcv, err := receiver.Open(tt.path, tt.opts)
			if err == nil {
				rcv.Close()
			}
			if !errors.Is(err, tt.want) {
				t.Fatalf("Open=%v, want %v", err, tt.want)
			}
			if tt.path == "" {
				return
			}
			got, err := os.ReadFile(tt.path)
			if tt.same == nil {
				if !errors.Is(err, os.ErrNotExist) {
					t.Fatalf("file exists after a refused Open (err %v)", err)
				}
				return
			}
			if !bytes.Equal(got, tt.same) {
				t.Fatalf("file changed by a refused Open")
			}
			if _, err := os.Stat(tt.path + "-journal"); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("journal left behind (stat err %v)", err)
			}
		})
	}
}

// TestOpenBusy checks that a lock held past the busy timeout is reported as
// ErrBusy, which the command maps to exit 6.
func TestOpenBusy(t *testing.T) {
	path := filepath.Join(t.TempDir(), "receiver.db")
	rcv, err := receiver.Open(path, receiver.Options{})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	rcv.Close()

	testbin.HoldExclusive(t, path)

	rcv, err = receiver.Open(path, receiver.Options{BusyTimeout: 50 * time.Millisecond})
	if err == nil {
		rcv.Close()
	}
	if !errors.Is(err, receiver.ErrBusy) {
		t.Fatalf("Open while locked=%v, want ErrBusy", err)
	}
}

// TestJournalMode checks on disk that the file uses a rollback journal.
func TestJournalMode(t *testing.T) {
	f := start(t, receiver.Options{}, nil)
	f.post(t, order("o-1", 7, 1))
	hdr := make([]byte, 20)
	fh, err := os.Open(f.path)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	if _, err := io.ReadFull(fh, hdr); err != nil {
		t.Fatal(err)
	}
	// Bytes 18 and 19 are the write and read format versions: 1 means
	// rollback journal, 2 would mean WAL.
	if got, want := [2]byte{hdr[18], hdr[19]}, [2]byte{1, 1}; got != want {
		t.Fatalf("format versions=%v, want %v (rollback journal)", got, want)
	}
}
