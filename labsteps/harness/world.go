package harness

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"snacklab/labsteps/result"
)

// Receiver is a running receiver process and its base URL.
type Receiver struct {
	*Proc
	URL string
	DB  string
}

// StartReceiver launches a receiver on a free loopback port with its own
// database in the work dir and waits for its "listening on" handshake.
func (h *Harness) StartReceiver(dbName string, flags ...string) *Receiver {
	db := filepath.Join(h.Dir, dbName)
	args := append([]string{"--db", db, "--addr", "127.0.0.1:0"}, flags...)
	p := h.Start("receiver", result.LaneReceiver, "receiver", result.NoClock, DescribeRequest, args...)
	first := p.WaitLine("the receiver announces `listening on 127.0.0.1:PORT`",
		func(Line) bool { return true },
		"senders need the address, and the lab waits for this handshake instead of sleeping")
	addr, ok := strings.CutPrefix(first.Text, "listening on ")
	// These checks name their clause whatever the part is about: every
	// part that starts a receiver depends on its handshake.
	listening := []string{"§5.listening"}
	_, port, err := net.SplitHostPort(addr)
	if !ok || err != nil {
		h.record(result.Check{What: "the receiver's first line is `listening on 127.0.0.1:PORT`", Clause: listening,
			Expected: "listening on 127.0.0.1:PORT (CONTRACT §5)", Observed: first.Text, Why: "senders need the address, and the lab waits for this handshake"})
	}
	if port == "0" {
		h.record(result.Check{What: "the receiver announces the address it bound, not the --addr 127.0.0.1:0 it was given", Clause: listening,
			Expected: "listening on 127.0.0.1:PORT with the port the system chose", Observed: first.Text,
			Why: "CONTRACT §5: the line names the bound address; port 0 asks the system for a free port, and nobody can connect to port 0"})
	}
	return &Receiver{Proc: p, URL: "http://" + addr, DB: db}
}

func DescribeRequest(l Line) (string, bool) {
	if l.Str("event") != "request" {
		return "", false
	}
	res := l.Str("result")
	text := fmt.Sprintf("request %s token %d → %s", l.Str("id"), l.Int("token"), res)
	if st := l.Int("status"); st > 0 {
		text += fmt.Sprintf(" %d", st)
	}
	switch res {
	case "applied":
		text += " (commit: stock +" + strconv.FormatInt(l.Int("qty"), 10) + ")"
	case "held":
		text += " (committed; response held)"
	case "duplicate":
		text += " (no stock change)"
	}
	return text, res != "applied" && res != "duplicate" && res != "held"
}

// WaitRequest waits until the receiver has logged a request for id with result.
func (r *Receiver) WaitRequest(id, result, why string) Line {
	return r.WaitLine(fmt.Sprintf("the receiver logs a request for %s with result %q", id, result),
		func(l Line) bool {
			return l.Str("event") == "request" && l.Str("id") == id && l.Str("result") == result
		}, why)
}

// Stock is the answer to GET /stock.
type Stock struct {
	Stock    int64            `json:"stock"`
	Orders   int64            `json:"orders"`
	Requests map[string]int64 `json:"requests"`
}

// Stock asks the receiver for its stock and request counts.
func (r *Receiver) Stock() Stock {
	var s Stock
	r.get("/stock", &s)
	return s
}

// Order is the answer to GET /orders/ID.
type Order struct {
	ID       string `json:"id"`
	Qty      int64  `json:"qty"`
	Token    int64  `json:"token"`
	Requests int64  `json:"requests"`
}

// Order asks the receiver about one order.
func (r *Receiver) Order(id string) Order {
	var o Order
	r.get("/orders/"+id, &o)
	return o
}

// SetFaults posts fault modes (CONTRACT §5).
func (r *Receiver) SetFaults(faults map[string]any) {
	body, _ := json.Marshal(faults)
	r.h.Action("POST /faults "+string(body), result.NoClock)
	r.call(http.MethodPost, "/faults", body, nil)
}

func (r *Receiver) get(path string, v any) { r.call(http.MethodGet, path, nil, v) }

func (r *Receiver) call(method, path string, body []byte, v any) {
	h := r.h
	ctx, cancel := context.WithTimeout(h.ctx, h.WaitLimit)
	defer cancel()
	what := fmt.Sprintf("the receiver answers %s %s with 200 and JSON", method, path)
	why := "the lab reads the receiver's effects only through its HTTP API (CONTRACT §5)"
	// Every call here is idempotent (GET /stock, GET /orders/ID, POST
	// /faults setting values), so a request the receiver cut is sent again.
	resp, err := doIdempotent(ctx, func() (*http.Request, error) {
		req, err := http.NewRequestWithContext(ctx, method, r.URL+path, bytes.NewReader(body))
		if err == nil && body != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		return req, err
	})
	if err != nil && errors.Is(err, context.DeadlineExceeded) && h.ctx.Err() == nil {
		// The wait's own limit ran out: a busy machine, not a wrong answer.
		h.Timeout(what, "200 within "+h.WaitLimit.String(), err.Error(), why)
	}
	if err != nil {
		h.Check(what, false, "200", err.Error(), why)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	h.Narrate("%s %s → %d %s", method, path, resp.StatusCode, strings.TrimSpace(string(b)))
	if resp.StatusCode != http.StatusOK {
		h.Check(what, false, "200", fmt.Sprintf("%d %s", resp.StatusCode, Trim(string(b))), why)
	}
	if v != nil {
		if err := DecodeObject(string(b), v); err != nil {
			h.Check(what, false, "a JSON object", fmt.Sprintf("%q: %v", Trim(string(b)), err), why)
		}
	}
}

// ---- senders ----

// SenderOpts are the flags of one sender process.
type SenderOpts struct {
	Mode             string // run-once (default) or run
	URL              string
	Now              int64 // injected clock; < 0 for the real clock
	LeaseMs          int64 // 0: the contract's default
	ExitAfterReceipt int   // 0: off
	// TimeoutMs is --timeout-ms. 0 gives the harness's PatienceMs: a
	// sender's HTTP timeout is not what a step judges unless it says so, and
	// a slow machine must not make it run out. ContractDefault leaves the
	// flag out.
	TimeoutMs int64
	// BusyTimeoutMs is --busy-timeout-ms; 0 leaves the flag out (the
	// contract's default, which step 7 judges).
	BusyTimeoutMs int64
	// Batch is --batch's value (CONTRACT §4, batched delivery, opt-in);
	// "" leaves the flag out.
	Batch string
}

// StartSender launches sender NAME (also its --owner and its timeline lane).
func (h *Harness) StartSender(name string, o SenderOpts) *Proc {
	args, clock := h.senderArgs(name, o)
	return h.Start(name, name, "sender", clock, describeSenderEvent, args...)
}

// StartTracedSender is StartSender under strace, recording calls, with
// extra flags.
func (h *Harness) StartTracedSender(name string, o SenderOpts, calls []string, extra ...string) *Traced {
	args, clock := h.senderArgs(name, o)
	return h.StartTraced(name, name, "sender", clock, describeSenderEvent, calls, append(args, extra...)...)
}

// senderArgs is sender NAME's command line for o and the clock it runs under.
func (h *Harness) senderArgs(name string, o SenderOpts) (args []string, clock int64) {
	mode := o.Mode
	if mode == "" {
		mode = "run-once"
	}
	args = []string{mode, "--db", h.DB, "--url", o.URL, "--owner", name, "--json"}
	if o.Now >= 0 {
		args = append(args, "--now-ms", strconv.FormatInt(o.Now, 10))
	}
	if o.LeaseMs > 0 {
		args = append(args, "--lease-ms", strconv.FormatInt(o.LeaseMs, 10))
	}
	timeout := o.TimeoutMs
	if timeout == 0 {
		timeout = h.PatienceMs()
	}
	if timeout > 0 {
		args = append(args, "--timeout-ms", strconv.FormatInt(timeout, 10))
	}
	if o.BusyTimeoutMs > 0 {
		args = append(args, "--busy-timeout-ms", strconv.FormatInt(o.BusyTimeoutMs, 10))
	}
	if o.ExitAfterReceipt > 0 {
		args = append(args, "--exit-after-receipt", strconv.Itoa(o.ExitAfterReceipt))
	}
	if o.Batch != "" {
		args = append(args, "--batch", o.Batch)
	}
	clock = o.Now
	if clock < 0 {
		clock = result.NoClock
	}
	return args, clock
}

func describeSenderEvent(l Line) (string, bool) {
	switch l.Str("event") {
	case "claiming":
		return "claiming", false
	case "claimed":
		return fmt.Sprintf("claimed %s token %d (lease_until %d)", l.Str("id"), l.Int("token"), l.Int("lease_until")), false
	case "empty":
		return "nothing claimable", false
	case "response":
		if l.Int("status") == 0 {
			return "no response", true
		}
		return fmt.Sprintf("response %d, ack %s", l.Int("status"), l.Raw("ack")), false
	case "finished":
		applied := "applied"
		if l.Obj["applied"] != true {
			applied = "NOT applied"
		}
		return fmt.Sprintf("finish %s token %d: %s %s → %s", l.Str("id"), l.Int("token"), l.Str("class"), applied, l.Raw("state")), l.Obj["applied"] != true
	}
	if l.Obj == nil {
		return "", false
	}
	return l.Text, false
}

// SenderRun is a sender process that has ended.
type SenderRun struct {
	Proc   *Proc
	Code   int
	Signal string
	Lines  []Line
}

// RunSender runs a sender to its end.
func (h *Harness) RunSender(name string, o SenderOpts) SenderRun {
	p := h.StartSender(name, o)
	return p.Finish("a sender's run-once ends by itself once it has decided")
}

// Finish waits for a sender process to end and collects what it printed.
func (p *Proc) Finish(why string) SenderRun {
	code, sig := p.Wait(why)
	return SenderRun{Proc: p, Code: code, Signal: sig, Lines: p.Lines()}
}

// Event returns the first line {"event": kind}.
func (s SenderRun) Event(kind string) (Line, bool) {
	for _, l := range s.Lines {
		if l.Str("event") == kind {
			return l, true
		}
	}
	return Line{}, false
}

// Events lists the event kinds printed, in order: "claiming claimed response finished".
func (s SenderRun) Events() string {
	var kinds []string
	for _, l := range s.Lines {
		if k := l.Str("event"); k != "" {
			kinds = append(kinds, k)
		} else {
			kinds = append(kinds, "non-JSON line "+strconv.Quote(l.Text))
		}
	}
	return strings.Join(kinds, " ")
}

// Exit says how the sender ended, with a pointer to its stderr when it did not exit 0.
func (s SenderRun) Exit() string {
	t := ExitText(s.Code, s.Signal)
	if s.Code != 0 {
		t += s.Proc.StderrHint()
	}
	return t
}

// RefusedURL is an http URL on which every connection is refused: the port
// is bound by the harness but never listened on, so no other process can be
// handed it while the step runs (as could happen to a port merely closed).
func (h *Harness) RefusedURL() string {
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err == nil {
		err = syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}})
		if err != nil {
			syscall.Close(fd)
		}
	}
	if err != nil {
		h.Fatalf("reserve a port nobody listens on", "a bound socket", "", "%v", err)
	}
	h.OnCleanup(func() { syscall.Close(fd) })
	sa, err := syscall.Getsockname(fd)
	in, ok := sa.(*syscall.SockaddrInet4)
	if err != nil || !ok {
		h.Fatalf("reserve a port nobody listens on", "a bound socket", "", "getsockname: %v", err)
	}
	return "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(in.Port))
}

// judgeClient is the lab's HTTP client for the receivers it judges. It
// opens a connection per request: a receiver may close an idle connection
// after a second (CONTRACT §5.bounds), and a request sent on a kept-alive
// connection the receiver is closing meets EOF, which would read as the
// receiver's failure.
var judgeClient = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}

// doIdempotent sends the request newReq makes, and sends it again, up to
// three times in all, when the connection failed without an answer: a
// receiver may cut a client it could not read within a second (CONTRACT
// §5.bounds), which a loaded grader can be, and a request whose effect is
// the same once or twice loses nothing by being repeated. A broken receiver
// fails all three.
func doIdempotent(ctx context.Context, newReq func() (*http.Request, error)) (*http.Response, error) {
	var resp *http.Response
	var err error
	for try := 0; try < 3; try++ {
		var req *http.Request
		if req, err = newReq(); err != nil {
			return nil, err
		}
		if resp, err = judgeClient.Do(req); err == nil || ctx.Err() != nil {
			return resp, err
		}
	}
	return resp, err
}
