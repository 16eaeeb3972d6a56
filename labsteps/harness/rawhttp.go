package harness

// Raw HTTP, for judging a receiver's answers directly.

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

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

// HTTP sends one request and returns the answer, judging nothing but
// the wait: an answer that did not come within WaitLimit ends the step as
// TIMEOUT (ExpectAnswered).
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
	var a HTTPAnswer
	if err != nil {
		h.Narrate("%s %s %s → %v", method, url, body, err)
		a = HTTPAnswer{Err: err}
	} else {
		defer resp.Body.Close()
		b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		a = HTTPAnswer{Status: resp.StatusCode, Body: strings.TrimSpace(string(b)), Err: err}
		h.Narrate("%s %s %s → %s", method, url, body, a)
	}
	// No caller judges an answer the lab stopped waiting for.
	h.ExpectAnswered(method+" "+url+" is answered", "an answer within "+h.WaitLimit.String(),
		"the lab judges the receiver by its answers: one that did not come within the lab's wait, on a busy machine, cannot be judged", a)
	return a
}
