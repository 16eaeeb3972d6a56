package harness

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"snacklab/labsteps/result"
)

// FakeReceiver is the lab's own HTTP server, standing in for the receiver so
// that a step judges the sender alone: it answers each order the way the step
// scripted it for that order id (any status and body, a redirect, an answer
// held until released, an answer never sent, a reset connection) and logs
// every request it got. It listens on loopback only.
type FakeReceiver struct {
	h   *Harness
	URL string // base address, as a sender's --url
	srv *http.Server

	mu      sync.Mutex
	answers map[string]Answer // by order id
	reqs    []FakeRequest
	notify  chan struct{} // closed and replaced on every request
	done    chan struct{} // closed when the step ends: hung answers give up
}

// Answer is how the fake answers every POST of one order id.
type Answer struct {
	Status int    // HTTP status of the answer
	Body   string // its body, sent as is
	// Redirect, with a 3xx Status, sends Location: URL+MovedPath, an endpoint
	// that logs whether it was ever reached (and would answer ack true).
	Redirect bool
	// Hang reads the request and never answers (until the client goes away
	// or the step ends): the sender's --timeout-ms must end the wait.
	Hang bool
	// Reset reads the request and then resets the connection (SO_LINGER 0):
	// the client meets ECONNRESET with no answer.
	Reset bool
	// Hold, when not nil, delays the answer until it is closed.
	Hold chan struct{}
	// Delay, when not zero, delays the answer this long (after Hold).
	Delay time.Duration
}

// MovedPath is where the fake's redirects point. Nothing in the contract
// sends a request there, so any request logged on it is a followed redirect.
const MovedPath = "/moved/orders"

// FakeRequest is one request the fake received.
type FakeRequest struct {
	Method string
	Path   string
	Body   string
	ID     string // the body's "id" when it is a JSON object with a string id
}

// String is the request as the story shows it.
func (r FakeRequest) String() string { return r.Method + " " + r.Path + " " + Trim(r.Body) }

// StartFakeReceiver starts the lab's own HTTP server on a loopback port; it
// stops when the step (or part) ends.
func (h *Harness) StartFakeReceiver() *FakeReceiver {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		h.Fatalf("start the lab's fake receiver", "a loopback listener", "the step serves the sender's answers itself", "%v", err)
	}
	f := &FakeReceiver{h: h, URL: "http://" + ln.Addr().String(), answers: map[string]Answer{},
		notify: make(chan struct{}), done: make(chan struct{})}
	f.srv = &http.Server{Handler: http.HandlerFunc(f.serve), ReadHeaderTimeout: h.patience()}
	go f.srv.Serve(ln)
	h.OnCleanup(func() {
		close(f.done)
		f.srv.Close()
	})
	h.Narrate("harness: the lab's fake receiver listens on %s", f.URL)
	return f
}

// On scripts the answer to every POST of order id.
func (f *FakeReceiver) On(id string, a Answer) {
	f.mu.Lock()
	f.answers[id] = a
	f.mu.Unlock()
}

// Requests lists every request received so far, in arrival order.
func (f *FakeReceiver) Requests() []FakeRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]FakeRequest(nil), f.reqs...)
}

// RequestsFor lists the requests that carried order id.
func (f *FakeReceiver) RequestsFor(id string) []FakeRequest {
	var out []FakeRequest
	for _, r := range f.Requests() {
		if r.ID == id {
			out = append(out, r)
		}
	}
	return out
}

// MovedHits lists the requests that reached the redirect target.
func (f *FakeReceiver) MovedHits() []FakeRequest {
	var out []FakeRequest
	for _, r := range f.Requests() {
		if r.Path == MovedPath {
			out = append(out, r)
		}
	}
	return out
}

// WaitRequest waits until a request for id has arrived and returns it.
func (f *FakeReceiver) WaitRequest(id, why string) FakeRequest {
	timer := time.NewTimer(f.h.WaitLimit)
	defer timer.Stop()
	for {
		f.mu.Lock()
		ch := f.notify
		for _, r := range f.reqs {
			if r.ID == id {
				f.mu.Unlock()
				return r
			}
		}
		f.mu.Unlock()
		select {
		case <-ch:
			continue
		case <-timer.C:
		case <-f.h.ctx.Done():
		}
		f.h.Check("the lab's fake receiver gets a POST for "+id, false, "a request carrying id "+id,
			fmt.Sprintf("none within %s; requests so far: %s", f.h.WaitLimit, ShowRequests(f.Requests())), why)
	}
}

// ShowRequests lists requests for a message: "none", or each one.
func ShowRequests(rs []FakeRequest) string {
	if len(rs) == 0 {
		return "none"
	}
	parts := make([]string, len(rs))
	for i, r := range rs {
		parts[i] = r.String()
	}
	return strings.Join(parts, " | ")
}

func (f *FakeReceiver) serve(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(req.Body, 1<<16))
	r := FakeRequest{Method: req.Method, Path: req.URL.Path, Body: string(body)}
	var obj map[string]any
	if json.Unmarshal(body, &obj) == nil {
		r.ID, _ = obj["id"].(string)
	}
	f.mu.Lock()
	f.reqs = append(f.reqs, r)
	close(f.notify)
	f.notify = make(chan struct{})
	a, scripted := f.answers[r.ID]
	f.mu.Unlock()

	switch {
	case r.Path == MovedPath:
		a = Answer{Status: http.StatusOK, Body: `{"ack":true,"duplicate":false,"stock":0}`}
	case r.Method != http.MethodPost || r.Path != "/orders":
		a = Answer{Status: http.StatusNotFound, Body: `{"ack":false,"error":"the contract's only order endpoint is POST /orders"}`}
	case !scripted:
		a = Answer{Status: http.StatusNotFound, Body: `{"ack":false,"error":"the lab scripted no answer for this id"}`}
	}
	f.h.Event(result.LaneReceiver, "line", "fake receiver: "+r.String()+" → "+a.describe(), result.NoClock, false)
	f.h.Narrate("fake receiver: %s → %s", r.String(), a.describe())

	if a.Hold != nil {
		select {
		case <-a.Hold:
		case <-req.Context().Done():
			return
		case <-f.done:
			return
		}
	}
	if a.Delay > 0 {
		select {
		case <-time.After(a.Delay):
		case <-req.Context().Done():
			return
		case <-f.done:
			return
		}
	}
	switch {
	case a.Hang:
		select {
		case <-req.Context().Done():
		case <-f.done:
		}
		return
	case a.Reset:
		if hj, ok := w.(http.Hijacker); ok {
			if conn, _, err := hj.Hijack(); err == nil {
				if tcp, ok := conn.(*net.TCPConn); ok {
					tcp.SetLinger(0)
				}
				conn.Close()
				return
			}
		}
		panic(http.ErrAbortHandler)
	}
	if a.Redirect {
		w.Header().Set("Location", f.URL+MovedPath)
	}
	if a.Body != "" {
		w.Header().Set("Content-Type", "application/json")
	}
	w.WriteHeader(a.Status)
	io.WriteString(w, a.Body)
}

func (a Answer) describe() string {
	switch {
	case a.Hang:
		return "never answered"
	case a.Reset:
		return "connection reset"
	}
	s := strconv.Itoa(a.Status) + " " + a.Body
	if a.Redirect {
		s += " Location: " + MovedPath
	}
	if a.Hold != nil {
		s += " (held until the harness releases it)"
	}
	if a.Delay > 0 {
		s += fmt.Sprintf(" (after %v)", a.Delay)
	}
	return strings.TrimSpace(s)
}

// ---- raw HTTP, for judging a receiver's answers directly ----

// HTTPAnswer is one answer the harness got, or the error in its place.
type HTTPAnswer struct {
	Status int
	Body   string
	Err    error
	// Held is, for a request PostTogether sent in two pieces, how long the
	// lab itself held it unfinished (from its first byte to its last); a
	// receiver may cut a client that slow (CONTRACT §5 allows bounds of a
	// second), so a failure after a long hold is the lab's slowness.
	Held time.Duration
}

// String is the answer as a message shows it.
func (a HTTPAnswer) String() string {
	if a.Err != nil {
		return "no answer: " + a.Err.Error()
	}
	return strconv.Itoa(a.Status) + " " + Trim(a.Body)
}

// Ack is the answer body's "ack" member as compact JSON ("absent" when none).
func (a HTTPAnswer) Ack() string { return a.Member("ack") }

// Member is the answer body's member key as compact JSON ("absent" when none).
func (a HTTPAnswer) Member(key string) string {
	var obj map[string]json.RawMessage
	if json.Unmarshal([]byte(a.Body), &obj) != nil {
		return "absent"
	}
	raw, ok := obj[key]
	if !ok {
		return "absent"
	}
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return "absent"
	}
	return b.String()
}

// HTTP sends one request and returns the answer, judging nothing.
func (h *Harness) HTTP(method, url, body string) HTTPAnswer {
	ctx, cancel := context.WithTimeout(h.ctx, h.WaitLimit)
	defer cancel()
	newReq := func() (*http.Request, error) {
		req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
		if err == nil && body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		return req, err
	}
	var resp *http.Response
	var err error
	if method == http.MethodGet {
		resp, err = doIdempotent(ctx, newReq) // a GET reads, so it may be sent again
	} else if req, rerr := newReq(); rerr != nil {
		return HTTPAnswer{Err: rerr}
	} else {
		resp, err = judgeClient.Do(req) // a POST /orders counts once per request: never sent twice
	}
	if err != nil {
		h.Narrate("%s %s %s → %v", method, url, body, err)
		return HTTPAnswer{Err: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	a := HTTPAnswer{Status: resp.StatusCode, Body: strings.TrimSpace(string(b)), Err: err}
	h.Narrate("%s %s %s → %s", method, url, body, a)
	return a
}

// PostTogether posts body to URL+path n times at once: it opens n
// connections, sends every request but the body's last byte, and then sends
// the n last bytes together, so the server has n requests in hand before any
// can be completed. When lockPath is not "", the harness holds that SQLite
// file's exclusive lock from before the first connection until the kernel
// says the server has read every request (at most a second), so that each
// request waits at its first use of the file and any interleaving of them is
// possible. The lock is taken first because taking it is slow (a helper
// process under the judged identity, on a loaded grader): taken between the
// first bytes and the last, it would hold every client unfinished for that
// long, which a receiver may cut at one second (CONTRACT §5.bounds). Each
// answer's Held says how long its client was held before its last byte. It
// returns the answers in connection order.
func (h *Harness) PostTogether(url, path, body string, n int, lockPath string) []HTTPAnswer {
	addr := strings.TrimPrefix(url, "http://")
	head := fmt.Sprintf("POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n",
		path, addr, len(body))
	answers := make([]HTTPAnswer, n)
	conns := make([]net.Conn, n)
	ports := make([]int, n)
	opened := make([]time.Time, n)
	held := make([]time.Duration, n)
	var lock *DBLock
	if lockPath != "" {
		lock = h.HoldExclusive(lockPath)
	}
	// The n connections are opened at once: each is held unfinished from
	// its opening until its last byte, so opening them one after the other
	// would hold the first for the time of all the others' openings.
	errs := make([]error, n)
	var opening sync.WaitGroup
	for i := range conns {
		opening.Go(func() {
			opened[i] = time.Now()
			c, err := net.DialTimeout("tcp", addr, h.WaitLimit)
			if err == nil {
				c.SetDeadline(time.Now().Add(h.WaitLimit))
				ports[i] = c.LocalAddr().(*net.TCPAddr).Port
				conns[i] = c
				_, err = io.WriteString(c, head+body[:len(body)-1])
			}
			errs[i] = err
		})
	}
	opening.Wait()
	for i, err := range errs {
		if err == nil {
			continue
		}
		for _, c := range conns {
			if c != nil {
				c.Close()
			}
		}
		if lock != nil {
			lock.Release()
		}
		h.Fatalf(fmt.Sprintf("open %d connections to %s", n, addr), "every connection accepted",
			"the receiver must take many requests at once", "connection %d: %v", i+1, err)
	}
	h.Action(fmt.Sprintf("%d connections each hold a POST %s %s but its last byte; now all last bytes at once", n, path, body), result.NoClock)
	// One goroutine writes every last byte, back to back: n goroutines
	// woken together would spread the arrivals over the scheduler's whims.
	for i, c := range conns {
		c.SetDeadline(time.Now().Add(h.WaitLimit))
		_, err := io.WriteString(c, body[len(body)-1:])
		held[i] = time.Since(opened[i])
		if err != nil {
			answers[i] = HTTPAnswer{Err: err, Held: held[i]}
		}
	}
	if lock != nil {
		if !waitRead(ports, time.Second) {
			h.Narrate("note: the receiver had not read all %d requests after 1s (it may read one at a time); releasing the lock", n)
		}
		lock.Release()
	}
	// A receiver may answer them one after the other, each after a commit
	// that a busy disk makes slow: the wait is for progress, WaitLimit for
	// each next answer, not for all of them.
	done := make(chan struct{}, n)
	for i, c := range conns {
		c.SetDeadline(time.Time{})
		go func() {
			defer func() { done <- struct{}{} }()
			if answers[i].Err != nil {
				return
			}
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				answers[i] = HTTPAnswer{Err: err, Held: held[i]}
				return
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
			answers[i] = HTTPAnswer{Status: resp.StatusCode, Body: strings.TrimSpace(string(b)), Err: err, Held: held[i]}
		}()
	}
	timer := time.NewTimer(h.WaitLimit)
	defer timer.Stop()
	for got := 0; got < n; {
		select {
		case <-done:
			got++
			timer.Reset(h.WaitLimit)
			continue
		case <-timer.C:
		case <-h.ctx.Done():
		}
		for _, c := range conns { // no answer for WaitLimit: the rest fail with a closed connection
			c.Close()
		}
		for ; got < n; got++ {
			<-done
		}
	}
	for _, c := range conns {
		c.Close()
	}
	return answers
}

// waitRead waits, at most limit, until the peer of every loopback
// connection whose local port is in ports has read all that was sent to it,
// as the kernel's socket table says (/proc/net/tcp: the receive queue of the
// socket whose remote port is ours). It reports whether that happened; the
// caller must never fail a step on false, since a server may rightly read
// a request only when it is ready to serve it.
func waitRead(ports []int, limit time.Duration) bool {
	want := map[int]bool{}
	for _, p := range ports {
		want[p] = true
	}
	end := time.Now().Add(limit)
	for {
		if b, err := os.ReadFile("/proc/net/tcp"); err == nil {
			pending := len(want)
			for _, line := range strings.Split(string(b), "\n")[1:] {
				f := strings.Fields(line)
				if len(f) < 5 {
					continue
				}
				_, rport, ok := strings.Cut(f[2], ":")
				port, err := strconv.ParseInt(rport, 16, 32)
				if !ok || err != nil || !want[int(port)] {
					continue
				}
				if _, rx, _ := strings.Cut(f[4], ":"); strings.Trim(rx, "0") == "" {
					pending--
				}
			}
			if pending <= 0 {
				return true
			}
		}
		if time.Now().After(end) {
			return false
		}
		time.Sleep(time.Millisecond) // polling the kernel's table, not waiting for a process
	}
}

// DBLock is an SQLite file's lock held by the harness.
type DBLock struct {
	h    *Harness
	hand *SQLHand
}

// HoldExclusive takes SQLite's EXCLUSIVE lock on the file at path (BEGIN
// EXCLUSIVE, writing nothing): in a rollback-journal file no other process
// can read or write it until Release. The receiver's file is an SQLite file
// (CONTRACT §5); nothing here depends on its tables. The lock only sharpens
// a race, so a file that cannot be locked within a second (a receiver may
// keep its own exclusive lock) is narrated, not failed: it returns nil.
func (h *Harness) HoldExclusive(path string) *DBLock {
	hand, err := h.openSQL(h.ctx, SQLiteDSN(path, 1000))
	if err == nil {
		if err = hand.Exec(h.ctx, "BEGIN EXCLUSIVE"); err != nil {
			hand.Close()
		}
	}
	if err != nil {
		h.Narrate("note: the harness could not lock %s (%v); the requests race without it", path, err)
		return nil
	}
	h.Action("BEGIN EXCLUSIVE on "+filepath.Base(path)+": the harness holds the receiver's file lock", result.NoClock)
	l := &DBLock{h: h, hand: hand}
	h.OnCleanup(func() { // a step that failed before Release must not leave the file locked
		if l.hand != nil {
			l.hand.Close()
			l.hand = nil
		}
	})
	return l
}

// Release rolls the empty transaction back.
func (l *DBLock) Release() {
	if l == nil || l.hand == nil {
		return
	}
	err := l.hand.Exec(context.Background(), "ROLLBACK")
	l.hand.Close()
	l.hand = nil
	l.h.Action("ROLLBACK: the receiver's file lock released", result.NoClock)
	if err != nil {
		l.h.Fatalf("the harness releases the lock", "ROLLBACK succeeds", "", "%v", err)
	}
}
