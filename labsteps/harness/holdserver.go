package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"snacklab/labsteps/result"
)

// HoldServer is the harness's own stand-in for the receiver: it records every
// POST /orders and holds each answer until Release, then answers
// 200 {"ack":true}. Holding the answer keeps a sender that has claimed a job
// from finishing it until the harness has seen what it needs to (the other
// sender's claim has run; the write lock is held), so an interleaving is
// forced rather than hoped for.
type HoldServer struct {
	h   *Harness
	URL string
	srv *http.Server

	mu       sync.Mutex
	requests map[string]int // POSTs per order id
	held     int            // answers waiting for Release
	released bool
	changed  chan struct{} // closed and replaced on every change
	release  chan struct{}
}

// StartHoldServer listens on a free loopback port until the step ends.
func (h *Harness) StartHoldServer() *HoldServer {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		h.Fatalf("the harness listens on a loopback port", "a listener", "the senders need somewhere to post", "%v", err)
	}
	s := &HoldServer{h: h, URL: "http://" + ln.Addr().String(), requests: map[string]int{},
		changed: make(chan struct{}), release: make(chan struct{})}
	s.srv = &http.Server{Handler: http.HandlerFunc(s.serve), ReadHeaderTimeout: h.patience()}
	go s.srv.Serve(ln)
	h.OnCleanup(func() {
		s.Release()
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		s.srv.Shutdown(ctx)
		s.srv.Close()
	})
	h.Action("the harness's holding server listens on "+s.URL+" (it holds every answer until released)", result.NoClock)
	return s
}

func (s *HoldServer) serve(w http.ResponseWriter, r *http.Request) {
	var order struct {
		ID    string `json:"id"`
		Qty   int64  `json:"qty"`
		Token int64  `json:"token"`
	}
	body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	json.Unmarshal(body, &order)
	s.mu.Lock()
	s.requests[order.ID]++
	s.held++
	s.bump()
	s.mu.Unlock()
	s.h.Event(result.LaneReceiver, "line", fmt.Sprintf("request %s token %d → answer held", order.ID, order.Token), result.NoClock, false)
	s.h.Narrate("holding server: POST %s %s (answer held)", r.URL.Path, body)
	select {
	case <-s.release:
	case <-r.Context().Done():
	}
	s.mu.Lock()
	s.held--
	s.bump()
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"ack":true,"duplicate":false,"stock":%d}`, order.Qty)
}

// bump wakes the waiters; call with s.mu held.
func (s *HoldServer) bump() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// WaitHeld waits until n answers are being held; when they are not within
// WaitLimit the step ends as TIMEOUT (Await): the senders may not have got
// there on a slow machine.
func (s *HoldServer) WaitHeld(n int, what, why string) {
	held := func() int {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.held
	}
	s.h.Await(what, fmt.Sprintf("%d request(s) at the holding server", n), why,
		func() bool { return held() >= n },
		func() <-chan struct{} {
			s.mu.Lock()
			defer s.mu.Unlock()
			return s.changed
		},
		func() string { return fmt.Sprintf("%d within %v", held(), s.h.WaitLimit) })
}

// Release answers every held request, and every later one at once.
func (s *HoldServer) Release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.released {
		return
	}
	s.released = true
	close(s.release)
	if s.h.closing.Load() {
		return
	}
	s.h.Action("the holding server answers 200 {\"ack\":true}", result.NoClock)
}

// Requests is how many POSTs arrived for id.
func (s *HoldServer) Requests(id string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests[id]
}
