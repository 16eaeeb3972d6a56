package harness

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
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

// WaitRequest waits until a request for id has arrived and returns it;
// when none comes within WaitLimit the step ends as TIMEOUT (Await): the
// sender may not have got there on a slow machine.
func (f *FakeReceiver) WaitRequest(id, why string) FakeRequest {
	var found FakeRequest
	f.h.Await("the lab's fake receiver gets a POST for "+id, "a request carrying id "+id, why,
		func() bool {
			rs := f.RequestsFor(id)
			if len(rs) > 0 {
				found = rs[0]
			}
			return len(rs) > 0
		}, f.changed,
		func() string {
			return fmt.Sprintf("none within %s; requests so far: %s", f.h.WaitLimit, ShowRequests(f.Requests()))
		})
	return found
}

// Arrives waits, as WaitRequest does, for a request for id and reports
// whether one came, judging nothing.
func (f *FakeReceiver) Arrives(id string) bool {
	return f.h.Until(func() bool { return len(f.RequestsFor(id)) > 0 }, f.changed)
}

// changed is closed at the next request.
func (f *FakeReceiver) changed() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.notify
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
