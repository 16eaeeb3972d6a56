package receiver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"time"
)

// MaxBody bounds a request body; an order is under 200 bytes, so anything
// near this is a sender bug, not an order.
const MaxBody = 4 << 10

// Results logged per POST /orders (CONTRACT §5).
const (
	ResultApplied   = "applied"
	ResultDuplicate = "duplicate"
	ResultConflict  = "conflict"
	ResultRejected  = "rejected"
	ResultFailed    = "failed"
	ResultInvalid   = "invalid"
	ResultHeld      = "held"
)

// Timeouts bound what one client can hold of the server. Each is a bound a
// well-behaved sender never meets: an order is under 200 bytes and its
// answer is written as soon as it is on disk.
type Timeouts struct {
	ReadHeader time.Duration // from accept (or the end of the last request) to the end of the headers
	Read       time.Duration // from the start of a request to the last byte of its body
	Write      time.Duration // from the end of the work (the commit) to the last byte of the answer
	Idle       time.Duration // a keep-alive connection with no request
	MaxHeader  int           // bytes of request line and headers
}

// DefaultTimeouts are the receiver's bounds (CONTRACT.md §5).
var DefaultTimeouts = Timeouts{
	ReadHeader: 10 * time.Second,
	Read:       30 * time.Second,
	Write:      30 * time.Second,
	Idle:       60 * time.Second,
	MaxHeader:  16 << 10,
}

// Server is an http.Server for r's Handler with the bounds of t. The write
// bound is set per request when the answer is ready (a wait for the
// database lock does not count against it), and a held response (the
// hold_next fault) clears both deadlines: it is held until the client goes
// away or the server stops, which ReleaseHeld, registered here, ensures.
func (r *Receiver) Server(errorLog *log.Logger, t Timeouts) *http.Server {
	r.writeTimeout = t.Write
	srv := &http.Server{
		Handler:           limitHeaders(t.MaxHeader, r.Handler()),
		ReadHeaderTimeout: t.ReadHeader,
		ReadTimeout:       t.Read,
		WriteTimeout:      t.Read + t.Write, // backstop; postOrder sets its own
		IdleTimeout:       t.Idle,
		MaxHeaderBytes:    t.MaxHeader, // net/http reads up to 4 KiB more; limitHeaders is exact
		ErrorLog:          errorLog,
	}
	srv.RegisterOnShutdown(r.ReleaseHeld)
	return srv
}

// limitHeaders answers 431 to a request whose request line and header
// lines, each with its CRLF, and the blank line that ends them, come to
// more than max bytes (CONTRACT §5): net/http's MaxHeaderBytes allows 4 KiB
// of slack beyond it, so the limit as documented is enforced here, from the
// parsed request (header names keep their length when canonicalized; a
// value's surrounding spaces, which net/http trims, are not counted).
func limitHeaders(max int, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if max > 0 && HeaderBytes(req) > max {
			w.Header().Set("Connection", "close")
			http.Error(w, "431 Request Header Fields Too Large", http.StatusRequestHeaderFieldsTooLarge)
			return
		}
		h.ServeHTTP(w, req)
	})
}

// HeaderBytes is the size of req's request line and headers on the wire:
// "METHOD URI PROTO\r\n", "Host: host\r\n", "Name: value\r\n" for each
// value, and the final "\r\n".
func HeaderBytes(req *http.Request) int {
	n := len(req.Method) + 1 + len(req.RequestURI) + 1 + len(req.Proto) + 2
	if req.Host != "" {
		n += len("Host: ") + len(req.Host) + 2
	}
	for name, values := range req.Header {
		for _, v := range values {
			n += len(name) + 2 + len(v) + 2
		}
	}
	return n + 2
}

// Handler routes CONTRACT §5's requests; anything else gets net/http's 404
// or 405.
func (r *Receiver) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /orders", r.postOrder)
	mux.HandleFunc("GET /orders/{id}", r.getOrder)
	mux.HandleFunc("GET /stock", r.getStock)
	mux.HandleFunc("POST /faults", r.postFaults)
	return mux
}

// logLine is the per-request record on the log writer.
type logLine struct {
	Event  string `json:"event"`
	ID     string `json:"id"`
	Qty    int64  `json:"qty"`
	Token  int64  `json:"token"`
	Result string `json:"result"`
	Status int    `json:"status"`
	AtMS   int64  `json:"at_ms"`
}

// errorBody is every refusal's answer.
type errorBody struct {
	Ack   bool   `json:"ack"`
	Error string `json:"error"`
}

// ackBody is the answer to an applied or duplicate order; Ack is any so a
// loose_ack fault can put 1 or "ok" there.
type ackBody struct {
	Ack       any   `json:"ack"`
	Duplicate bool  `json:"duplicate"`
	Stock     int64 `json:"stock"`
}

func (r *Receiver) postOrder(w http.ResponseWriter, req *http.Request) {
	atMS := r.now().UnixMilli()
	// Once a request is in, its count and its order land whatever the
	// client does next; busy_timeout bounds the wait instead.
	ctx := context.WithoutCancel(req.Context())

	var o Order
	body, err := io.ReadAll(http.MaxBytesReader(w, req.Body, MaxBody))
	var decodeErr error
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		decodeErr = fmt.Errorf("%w: body larger than %d bytes", ErrMalformed, MaxBody)
	case err != nil:
		decodeErr = fmt.Errorf("%w: read body: %v", ErrMalformed, err)
	default:
		o, decodeErr = DecodeOrder(body)
	}

	rc := http.NewResponseController(w)
	answer := func(result string, status int, v any) {
		r.logRequest(o, result, status, atMS)
		if r.writeTimeout > 0 {
			// The bound starts now: a long wait for the lock is not the
			// client's doing. Errors mean the connection cannot take a
			// deadline, and the server's backstop still holds.
			_ = rc.SetWriteDeadline(time.Now().Add(r.writeTimeout))
		}
		writeJSON(w, status, v)
	}
	// countOrFail counts a request that changes nothing else; false means
	// the count failed and the answer has been sent.
	countOrFail := func() bool {
		if o.ID == "" {
			return true
		}
		if err := r.countRequest(ctx, o.ID); err != nil {
			answer(ResultFailed, statusFor(err), errorBody{Error: err.Error()})
			return false
		}
		return true
	}

	if r.takeFail() {
		if countOrFail() {
			answer(ResultFailed, http.StatusServiceUnavailable, errorBody{Error: "fail_next fault: try again"})
		}
		return
	}
	if decodeErr != nil {
		if countOrFail() {
			answer(ResultInvalid, http.StatusBadRequest, errorBody{Error: decodeErr.Error()})
		}
		return
	}
	if r.rejects(o.ID) {
		if countOrFail() {
			answer(ResultRejected, http.StatusUnprocessableEntity,
				errorBody{Error: fmt.Sprintf("order %s rejected by reject_ids fault", o.ID)})
		}
		return
	}

	res, stock, prevQty, err := r.record(ctx, o, atMS)
	if err != nil {
		answer(ResultFailed, statusFor(err), errorBody{Error: "record order: " + err.Error()})
		return
	}
	switch res {
	case conflict:
		answer(ResultConflict, http.StatusConflict, errorBody{
			Error: fmt.Sprintf("order %s already recorded with qty %d, not %d", o.ID, prevQty, o.Qty),
		})
	case duplicate:
		answer(ResultDuplicate, http.StatusOK, ackBody{Ack: r.ack(), Duplicate: true, Stock: stock})
	case applied:
		if r.takeHold() {
			// Status 0: like the sender's log, no HTTP answer was sent.
			r.logRequest(o, ResultHeld, 0, atMS)
			// Held until the client goes away: neither the read bound
			// (which would end the background read that notices the
			// client leaving) nor the write bound may cut it.
			_ = rc.SetReadDeadline(time.Time{})
			_ = rc.SetWriteDeadline(time.Time{})
			select {
			case <-req.Context().Done():
				return
			case <-r.quit:
				panic(http.ErrAbortHandler)
			}
		}
		answer(ResultApplied, http.StatusOK, ackBody{Ack: r.ack(), Duplicate: false, Stock: stock})
	}
}

// statusFor answers a busy database 503, which a sender retries, and any
// other failure 500.
func statusFor(err error) int {
	if errors.Is(err, ErrBusy) {
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

func (r *Receiver) getStock(w http.ResponseWriter, req *http.Request) {
	v, err := r.stock(req.Context())
	if err != nil {
		writeJSON(w, statusFor(err), errorBody{Error: err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, v)
}

func (r *Receiver) getOrder(w http.ResponseWriter, req *http.Request) {
	id := req.PathValue("id")
	if !ValidID(id) {
		writeJSON(w, http.StatusNotFound, errorBody{Error: "no such order: id is not a valid order id"})
		return
	}
	v, found, err := r.order(req.Context(), id)
	switch {
	case err != nil:
		writeJSON(w, statusFor(err), errorBody{Error: err.Error()})
	case !found:
		writeJSON(w, http.StatusNotFound, errorBody{Error: fmt.Sprintf("no such order %s", id)})
	default:
		writeJSON(w, http.StatusOK, v)
	}
}

func (r *Receiver) postFaults(w http.ResponseWriter, req *http.Request) {
	dec := json.NewDecoder(http.MaxBytesReader(w, req.Body, MaxBody))
	dec.DisallowUnknownFields()
	var p *faultsPatch
	if err := dec.Decode(&p); err != nil {
		writeJSON(w, http.StatusBadRequest, errorBody{Error: "faults: " + err.Error()})
		return
	}
	if p == nil {
		writeJSON(w, http.StatusBadRequest, errorBody{Error: "faults: body must be a JSON object"})
		return
	}
	if _, err := dec.Token(); err != io.EOF {
		writeJSON(w, http.StatusBadRequest, errorBody{Error: "faults: body must hold exactly one JSON object"})
		return
	}
	r.mu.Lock()
	next := p.apply(r.faults)
	err := next.Validate()
	if err == nil {
		r.faults = next.normalized()
	}
	cur := r.faults.normalized()
	r.mu.Unlock()
	if err != nil {
		writeJSON(w, http.StatusBadRequest, errorBody{Error: "faults: " + err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, cur)
}

// logRequest writes one line; a failing log writer must not fail the order,
// which is already on disk, so its error is dropped.
func (r *Receiver) logRequest(o Order, result string, status int, atMS int64) {
	line, err := json.Marshal(logLine{
		Event: "request", ID: o.ID, Qty: o.Qty, Token: o.Token,
		Result: result, Status: status, AtMS: atMS,
	})
	if err != nil {
		return
	}
	line = append(line, '\n')
	r.logMu.Lock()
	defer r.logMu.Unlock()
	r.log.Write(line)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}
