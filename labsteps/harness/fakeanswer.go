package harness

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

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

// On scripts the answer to every POST of order id.
func (f *FakeReceiver) On(id string, a Answer) {
	f.mu.Lock()
	f.answers[id] = a
	f.mu.Unlock()
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
