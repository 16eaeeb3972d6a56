// Package sender delivers snack orders from the queue to the receiver, one
// job at a time: claim under a lease, POST the order, classify the answer
// strictly, and finish with the token of that claim (CONTRACT.md §4).
//
// The classification is deliberately narrow. Only a 2xx whose `ack` is the
// JSON boolean true counts as delivered; anything the sender cannot explain
// is returned to the caller with the job left leased, so the lease runs out
// and the next claim brings the job back instead of a guess burying it.
package sender

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"time"

	"snacklab/queue"
)

// Errors callers test for. ErrRetryable and ErrPermanent are classifications
// that RunOnce turns into a finish; the others leave the job leased (except
// ErrStale, where the finish was refused because the job is no longer ours).
var (
	// ErrRetryable is a temporary failure: 5xx, a timeout, a refused or reset connection.
	ErrRetryable = errors.New("retryable")
	// ErrPermanent is a refusal the receiver will repeat: any 4xx.
	ErrPermanent = errors.New("permanent")
	// ErrBadAck is a 2xx whose ack is not exactly true: `1` and "ok" are not success.
	ErrBadAck = errors.New("bad ack")
	// ErrUnexpected is any other outcome (3xx, 1xx, an unknown transport error).
	ErrUnexpected = errors.New("unexpected delivery result")
	// ErrStale means finish was not applied: another claim holds a newer token.
	ErrStale = errors.New("finish not applied: token is stale")
	// ErrStoppedAfterReceipt is returned when the crash hook returns instead of
	// exiting, so in-process tests can observe the state a crash leaves behind.
	ErrStoppedAfterReceipt = errors.New("stopped after receipt")
)

// Class names a classification in events and results.
type Class string

// The classes of CONTRACT.md §4, as they appear in the "finished" event.
const (
	ClassOK         Class = "ok"
	ClassRetryable  Class = "retryable"
	ClassPermanent  Class = "permanent"
	ClassBadAck     Class = "bad_ack"
	ClassUnexpected Class = "unexpected"
)

// ClassOf names the classification err carries; nil is ClassOK.
func ClassOf(err error) Class {
	switch {
	case err == nil:
		return ClassOK
	case errors.Is(err, ErrRetryable):
		return ClassRetryable
	case errors.Is(err, ErrPermanent):
		return ClassPermanent
	case errors.Is(err, ErrBadAck):
		return ClassBadAck
	}
	return ClassUnexpected
}

// maxBody bounds how much of an answer is read; an ack never needs more.
const maxBody = 1 << 20

// Classify decides what one HTTP exchange means. status is 0 when no response
// arrived; body is what was read of it; err is the transport or read error.
// It returns nil only for a 2xx whose body is a JSON object with an "ack"
// member (exact, case-sensitive key) that is the literal true.
func Classify(status int, body []byte, err error) error {
	// BEGIN SOLUTION classify: nil only for a 2xx whose ack is the JSON boolean true; 5xx and transient transport errors ErrRetryable; 4xx ErrPermanent; other acks ErrBadAck; anything else ErrUnexpected (CONTRACT.md §4)
	switch {
	case status == 0 || (status >= 200 && status < 300 && err != nil):
		if err == nil {
			return fmt.Errorf("%w: no response", ErrUnexpected)
		}
		if transient(err) {
			return fmt.Errorf("%w: %v", ErrRetryable, err)
		}
		return fmt.Errorf("%w: %v", ErrUnexpected, err)
	case status >= 500 && status < 600:
		return fmt.Errorf("%w: status %d", ErrRetryable, status)
	case status >= 400 && status < 500:
		return fmt.Errorf("%w: status %d", ErrPermanent, status)
	case status >= 200 && status < 300:
		ack, ok := Ack(body)
		if !ok {
			return fmt.Errorf("%w: status %d, no ack in body", ErrBadAck, status)
		}
		if !bytes.Equal(ack, []byte("true")) {
			return fmt.Errorf("%w: status %d, ack %s", ErrBadAck, status, ack)
		}
		return nil
	}
	return fmt.Errorf("%w: status %d", ErrUnexpected, status)
	// END SOLUTION classify
	// STARTER: return fmt.Errorf("classify: %w (sender/sender.go: Classify)", queue.ErrNotImplemented)
}

// Ack extracts the body's "ack" member, compacted, and reports whether the
// body is a JSON object that has one. A map rather than a struct, because
// encoding/json matches struct fields case-insensitively and "ACK" is not "ack".
func Ack(body []byte) (json.RawMessage, bool) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(body, &obj); err != nil || obj == nil {
		return nil, false
	}
	raw, ok := obj["ack"]
	if !ok {
		return nil, false
	}
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return nil, false
	}
	return b.Bytes(), true
}

// transient reports whether a transport error is worth another attempt:
// the receiver may simply have been slow, down or restarting.
func transient(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) ||
		(errors.As(err, &ne) && ne.Timeout()) ||
		errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}

// TransportError names a transport failure for the response event's optional
// "error" member (CONTRACT.md §4): "connection refused", "timeout",
// "connection reset", "connection closed", or the error's own text, so an
// operator reading a status-0 response knows what happened on the wire.
func TransportError(err error) string {
	var ne net.Error
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()):
		return "timeout"
	case errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE):
		return "connection reset"
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		return "connection closed"
	}
	return strings.ReplaceAll(err.Error(), "\n", "; ")
}

// EvidenceOf is what the queue keeps of one exchange (CONTRACT.md §3
// finish evidence): the HTTP status, if any, and an error class, never the
// body or an error's text.
func EvidenceOf(status int, postErr error, class Class) queue.Evidence {
	var ev queue.Evidence
	if status >= 100 && status <= 599 {
		ev.Status = status
	}
	switch {
	case status == 0 && postErr != nil:
		ev.Error = transportClass(postErr)
	case status >= 300 && status < 400:
		ev.Error = queue.Error3xx
	case class == ClassBadAck:
		ev.Error = queue.ErrorBadAck
	case status >= 200 && status < 300 && postErr != nil:
		ev.Error = transportClass(postErr) // the body was cut off
	case status < 200 || status >= 400:
		ev.Error = queue.ErrorHTTP
	}
	return ev
}

// transportClass is TransportError as an error class.
func transportClass(err error) queue.ErrorClass {
	switch TransportError(err) {
	case "connection refused":
		return queue.ErrorRefused
	case "timeout":
		return queue.ErrorTimeout
	case "connection reset":
		return queue.ErrorReset
	case "connection closed":
		return queue.ErrorClosed
	}
	return queue.ErrorTransport
}

// Sender delivers jobs from Queue to the receiver at URL as Owner.
type Sender struct {
	Queue   *queue.Queue
	URL     string // receiver base URL; orders go to URL + "/orders"
	Owner   string
	LeaseMs int64
	// Timeout bounds one POST, from connecting to the end of the body.
	// Zero means 5s.
	Timeout time.Duration
	// Client sends the request; nil means http.DefaultClient's settings.
	// Redirects are never followed, whatever the client says: a 3xx is
	// an unexpected answer, not a detour.
	Client *http.Client
	// Now is the clock in ms since the epoch; nil means the real clock.
	Now func() int64
	// Events receives one line per event, written before the next action,
	// so a process killed at any point has told what it had done.
	Events io.Writer
	// Human switches Events from JSON lines to readable lines.
	Human bool
	// ExitAfterReceipt, when set, runs right after the response is read and
	// reported, before classification and finish. The binary exits there
	// (running no deferred cleanup) to show what a crash after receipt leaves.
	ExitAfterReceipt func()
	// Batch, when above 1, makes Run claim, deliver and finish up to Batch
	// jobs at a time (RunBatch): one claim and one finish transaction per
	// batch instead of per job. 0 or 1 is one job at a time (RunOnce).
	Batch int
}

// Result is what became of one RunOnce.
type Result struct {
	Claimed bool
	Job     queue.Job // as claimed
	Status  int       // HTTP status; 0 when no response arrived
	Ack     json.RawMessage
	Class   Class // "" until classified
	Applied bool  // finish was applied
	After   queue.Job
}

// Event is one line of the progress report of CONTRACT.md §4.
type Event struct {
	Kind       string // claiming, claimed, empty, response, finished
	Owner      string
	ID         string
	Qty        int64
	Token      int64
	Attempt    int64
	LeaseUntil int64
	Status     int
	Ack        json.RawMessage // nil: none
	Error      string          // response: the transport error when no HTTP response came; "" otherwise
	Class      Class
	Applied    bool
	State      queue.State  // "": job unknown
	Reason     queue.Reason // "": none
}

// MarshalJSON writes the fields the contract lists for the event's kind, in
// its order, with null for an absent ack, state or reason.
func (e Event) MarshalJSON() ([]byte, error) {
	null := func(s string) *string {
		if s == "" {
			return nil
		}
		return &s
	}
	var v any
	switch e.Kind {
	case "claiming":
		v = struct {
			Event string `json:"event"`
			Owner string `json:"owner"`
		}{e.Kind, e.Owner}
	case "claimed":
		v = struct {
			Event      string `json:"event"`
			ID         string `json:"id"`
			Qty        int64  `json:"qty"`
			Token      int64  `json:"token"`
			Attempt    int64  `json:"attempt"`
			LeaseUntil int64  `json:"lease_until"`
		}{e.Kind, e.ID, e.Qty, e.Token, e.Attempt, e.LeaseUntil}
	case "response":
		ack := e.Ack
		if ack == nil {
			ack = json.RawMessage("null")
		}
		v = struct {
			Event  string          `json:"event"`
			ID     string          `json:"id"`
			Token  int64           `json:"token"`
			Status int             `json:"status"`
			Ack    json.RawMessage `json:"ack"`
			Error  string          `json:"error,omitempty"`
		}{e.Kind, e.ID, e.Token, e.Status, ack, e.Error}
	case "finished":
		v = struct {
			Event   string  `json:"event"`
			ID      string  `json:"id"`
			Token   int64   `json:"token"`
			Class   Class   `json:"class"`
			Applied bool    `json:"applied"`
			State   *string `json:"state"`
			Reason  *string `json:"reason"`
		}{e.Kind, e.ID, e.Token, e.Class, e.Applied, null(string(e.State)), null(string(e.Reason))}
	default:
		v = struct {
			Event string `json:"event"`
		}{e.Kind}
	}
	return json.Marshal(v)
}

// String is the event as one readable line.
func (e Event) String() string {
	switch e.Kind {
	case "claiming":
		return fmt.Sprintf("claiming as %s", e.Owner)
	case "claimed":
		return fmt.Sprintf("claimed %s qty=%d token=%d attempt=%d lease_until=%d", e.ID, e.Qty, e.Token, e.Attempt, e.LeaseUntil)
	case "empty":
		return "nothing claimable"
	case "response":
		ack := string(e.Ack)
		if e.Ack == nil {
			ack = "none"
		}
		s := fmt.Sprintf("response %s token=%d status=%d ack=%s", e.ID, e.Token, e.Status, ack)
		if e.Error != "" {
			s += " error=" + e.Error
		}
		return s
	case "finished":
		s := fmt.Sprintf("finished %s token=%d class=%s applied=%t state=%s", e.ID, e.Token, e.Class, e.Applied, e.State)
		if e.Reason != "" {
			s += " reason=" + string(e.Reason)
		}
		return s
	}
	return e.Kind
}

func (s *Sender) emit(e Event) error {
	if s.Events == nil {
		return nil
	}
	var line []byte
	if s.Human {
		line = []byte(e.String())
	} else {
		b, err := json.Marshal(e)
		if err != nil {
			return fmt.Errorf("event %s: %w", e.Kind, err)
		}
		line = b
	}
	if _, err := s.Events.Write(append(line, '\n')); err != nil {
		return fmt.Errorf("write event %s: %w", e.Kind, err)
	}
	return nil
}

func (s *Sender) now() int64 {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now().UnixMilli()
}

// RunOnce claims one job, posts it, classifies the answer and finishes the job
// with its token. Nothing claimable is Result{Claimed: false} and no error.
//
// ctx cancels only the claim: once a job is claimed it is carried to a
// decision, so a stop request never abandons a job mid-delivery. BadAck and
// unexpected answers return ErrBadAck or ErrUnexpected with the job still
// leased; a refused finish returns ErrStale.
func (s *Sender) RunOnce(ctx context.Context) (Result, error) {
	// BEGIN SOLUTION run-once: emit claiming, claim, emit claimed, POST, emit response, crash switch, classify, finish ok/retry/permanent under the token and emit finished; BadAck and unexpected results leave the job leased (CONTRACT.md §4)
	if err := s.emit(Event{Kind: "claiming", Owner: s.Owner}); err != nil {
		return Result{}, err
	}
	job, ok, err := s.Queue.Claim(ctx, s.Owner, s.now(), s.LeaseMs)
	if err != nil {
		return Result{}, err
	}
	if !ok {
		return Result{}, s.emit(Event{Kind: "empty"})
	}
	res := Result{Claimed: true, Job: job}
	if err := s.emit(Event{Kind: "claimed", ID: job.ID, Qty: job.Qty, Token: job.Token,
		Attempt: job.Attempts, LeaseUntil: job.LeaseUntil}); err != nil {
		return res, err
	}
	ctx = context.WithoutCancel(ctx)

	status, body, postErr := s.post(ctx, job)
	res.Status = status
	res.Ack, _ = Ack(body)
	var terr string
	if status == 0 && postErr != nil {
		terr = TransportError(postErr)
	}
	if err := s.emit(Event{Kind: "response", ID: job.ID, Token: job.Token, Status: status, Ack: res.Ack, Error: terr}); err != nil {
		return res, err
	}
	if s.ExitAfterReceipt != nil {
		s.ExitAfterReceipt()
		return res, fmt.Errorf("%s token %d: %w", job.ID, job.Token, ErrStoppedAfterReceipt)
	}

	cerr := Classify(status, body, postErr)
	res.Class = ClassOf(cerr)
	ev := EvidenceOf(status, postErr, res.Class)
	var outcome queue.Outcome
	switch res.Class {
	case ClassOK:
		outcome = queue.OutcomeOK
	case ClassRetryable:
		outcome = queue.OutcomeRetry
	case ClassPermanent:
		outcome = queue.OutcomePermanent
	default:
		// No decision, but the evidence is kept: the job stays leased.
		if _, err := s.Queue.NoteAttempt(ctx, job.ID, job.Token, ev, s.now()); err != nil {
			return res, fmt.Errorf("deliver %s token %d: %w (job left leased; its evidence not kept: %v)", job.ID, job.Token, cerr, err)
		}
		return res, fmt.Errorf("deliver %s token %d: %w (job left leased)", job.ID, job.Token, cerr)
	}
	after, applied, err := s.Queue.Finish(ctx, job.ID, job.Token, outcome, s.now(), ev)
	if err != nil {
		return res, err
	}
	res.Applied, res.After = applied, after
	if err := s.emit(Event{Kind: "finished", ID: job.ID, Token: job.Token, Class: res.Class,
		Applied: applied, State: after.State, Reason: after.Reason}); err != nil {
		return res, err
	}
	if !applied {
		return res, fmt.Errorf("finish %s token %d: %w (job is %s, token %d)", job.ID, job.Token, ErrStale, after.State, after.Token)
	}
	return res, nil
	// END SOLUTION run-once
	// STARTER: return Result{}, fmt.Errorf("%w (sender/sender.go: RunOnce)", queue.ErrNotImplemented)
}

// Run repeats RunOnce (RunBatch when s.Batch > 1) until nothing is
// claimable or ctx is done, and returns how many jobs it claimed. A stop
// request lets the current job (the current batch) finish.
func (s *Sender) Run(ctx context.Context) (int, error) {
	if s.Batch > 1 {
		return s.runBatches(ctx)
	}
	n := 0
	for ctx.Err() == nil {
		res, err := s.RunOnce(ctx)
		if res.Claimed {
			n++
		}
		if err != nil {
			if !res.Claimed && ctx.Err() != nil {
				return n, nil // stopped while waiting to claim: nothing was taken
			}
			return n, err
		}
		if !res.Claimed {
			return n, nil
		}
	}
	return n, nil
}

// OrdersURL is the receiver's base URL with /orders appended to its path
// (CONTRACT §4.url): a query stays the query, so "http://h/api?k=v" posts to
// "http://h/api/orders?k=v", never to "…?k=v/orders". A fragment is never
// sent, so it is dropped.
func OrdersURL(base string) (string, error) {
	u, err := url.Parse(base)
	if err != nil {
		return "", fmt.Errorf("receiver url %q: %w", base, err)
	}
	u.Path = strings.TrimRight(u.Path, "/") + "/orders"
	if u.RawPath != "" {
		u.RawPath = strings.TrimRight(u.RawPath, "/") + "/orders"
	}
	u.Fragment, u.RawFragment = "", ""
	return u.String(), nil
}

// post sends the order and reads the answer. status is 0 when none arrived.
func (s *Sender) post(ctx context.Context, job queue.Job) (status int, body []byte, err error) {
	payload, err := json.Marshal(struct {
		ID    string `json:"id"`
		Qty   int64  `json:"qty"`
		Token int64  `json:"token"`
	}{job.ID, job.Qty, job.Token})
	if err != nil {
		return 0, nil, fmt.Errorf("encode order: %w", err)
	}
	timeout := s.Timeout
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	target, err := OrdersURL(s.URL)
	if err != nil {
		return 0, nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(payload))
	if err != nil {
		return 0, nil, fmt.Errorf("post order: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	client := http.Client{}
	if s.Client != nil {
		client = *s.Client
	}
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("post order: %w", err)
	}
	defer resp.Body.Close()
	body, err = io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return resp.StatusCode, body, fmt.Errorf("read answer: %w", err)
	}
	return resp.StatusCode, body, nil
}
