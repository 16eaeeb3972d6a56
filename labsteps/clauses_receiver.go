package labsteps

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"snacklab/labsteps/harness"
	"snacklab/labsteps/result"
)

// faultModes judges each fault mode of CONTRACT §5 by what the receiver
// answers and records: fail_next, POST /faults leaving absent fields as they
// were, loose_ack, hold_next and a graceful stop with a held answer.
func faultModes(h *harness.Harness) {
	h.Clause("§5.listening")
	rcv := h.StartReceiver("receiver-p.db")
	post := func(body string) harness.HTTPAnswer { return h.HTTP(http.MethodPost, rcv.URL+"/orders", body) }
	order := func(id string, qty int) string { return fmt.Sprintf(`{"id":%q,"qty":%d,"token":1}`, id, qty) }
	answer := func(a harness.HTTPAnswer) string {
		if a.Err != nil {
			return a.String()
		}
		return fmt.Sprintf("%d ack=%s duplicate=%s", a.Status, a.Ack(), a.Member("duplicate"))
	}

	h.Section("p: fail_next 2, then POST /faults with other fields only")
	h.Clause("§5.faults.fail-next", "§5.faults.post")
	why := "CONTRACT §5: fail_next answers the next N orders 503 before touching them, and POST /faults changes only the fields it names (absent = unchanged)"
	rcv.SetFaults(map[string]any{"fail_next": 2})
	rcv.SetFaults(map[string]any{"reject_ids": []string{"p-never"}})
	var got []string
	for _, id := range []string{"p-1", "p-2", "p-3"} {
		got = append(got, id+": "+answer(post(order(id, 7))))
	}
	h.Equal("fail_next 2 (then reject_ids set alone): three new orders", "p-1: 503 ack=false duplicate=absent; p-2: 503 ack=false duplicate=absent; p-3: 200 ack=true duplicate=false",
		strings.Join(got, "; "), why)
	st := rcv.Stock()
	h.Equal("the two orders answered 503 were not touched; each request was counted", "stock=7 orders=1 p-1=1 p-2=1 p-3=1",
		fmt.Sprintf("stock=%d orders=%d p-1=%d p-2=%d p-3=%d", st.Stock, st.Orders, st.Requests["p-1"], st.Requests["p-2"], st.Requests["p-3"]), why)
	h.Equal("p-1 again, now that fail_next is spent", "200 ack=true duplicate=false", answer(post(order("p-1", 7))),
		why+": an order answered 503 was never applied, so its resend is new")

	h.Section("p: loose_ack")
	h.Clause("§5.faults.loose-ack", "§5.faults.post")
	why = "CONTRACT §5: loose_ack replaces true by 1 or \"ok\" in successful answers — new and duplicate alike — while a refusal still says false; POST /faults leaves the other modes as they were"
	rcv.SetFaults(map[string]any{"loose_ack": "1"})
	got = []string{answer(post(order("p-4", 7))), answer(post(order("p-4", 7))), answer(post(order("p-4", 8))), answer(post(order("p-never", 7)))}
	rcv.SetFaults(map[string]any{"loose_ack": "ok"})
	got = append(got, answer(post(order("p-4", 7))))
	rcv.SetFaults(map[string]any{"loose_ack": ""})
	got = append(got, answer(post(order("p-4", 7))))
	h.Equal("loose_ack 1: new, duplicate, conflict, rejected; loose_ack ok: duplicate; loose_ack \"\": duplicate",
		"200 ack=1 duplicate=false; 200 ack=1 duplicate=true; 409 ack=false duplicate=absent; 422 ack=false duplicate=absent; 200 ack=\"ok\" duplicate=true; 200 ack=true duplicate=true",
		strings.Join(got, "; "), why)

	h.Section("p: reject_ids set again replaces the list")
	h.Clause("§5.faults.reject", "§5.faults.post")
	why = "CONTRACT §5: POST /faults sets the fault modes it names: reject_ids given again is the new list, not an addition to the old one"
	rcv.SetFaults(map[string]any{"reject_ids": []string{"p-other"}})
	h.Equal("after reject_ids [p-never] and then [p-other]: p-never, then p-other", "200 ack=true duplicate=false; 422 ack=false duplicate=absent",
		answer(post(order("p-never", 7)))+"; "+answer(post(order("p-other", 7))), why)
	rcv.SetFaults(map[string]any{"reject_ids": []string{}})
	heldAndStopped(h, rcv)
}

// heldAndStopped: hold_next commits a new order and holds its answer, a
// duplicate is never held, and SIGTERM drops the held connection unanswered.
func heldAndStopped(h *harness.Harness, rcv *harness.Receiver) {
	h.Section("p: hold_next 1, then SIGTERM")
	h.Clause("§5.faults.hold")
	why := "CONTRACT §5: hold_next commits the next N new orders and then holds each answer: the effect is on disk while the sender still waits, which is the crash window step 8 is about"
	rcv.SetFaults(map[string]any{"hold_next": 1})
	dup := rawPost(h, rcv.URL, `{"id":"p-3","qty":7,"token":2}`)
	l := rcv.WaitLine("the receiver logs the duplicate p-3", func(l harness.Line) bool {
		return l.Str("event") == "request" && l.Str("id") == "p-3" && l.Int("token") == 2
	}, why)
	h.Equal("a duplicate under hold_next 1 is answered, not held: its log line", "duplicate 200",
		fmt.Sprintf("%s %d", l.Str("result"), l.Int("status")), why+"; only new orders are held")
	dup.Close()
	held := rawPost(h, rcv.URL, `{"id":"p-held","qty":5,"token":1}`)
	l = rcv.WaitLine("the receiver logs p-held", func(l harness.Line) bool {
		return l.Str("event") == "request" && l.Str("id") == "p-held"
	}, why)
	h.Clause("§5.faults.hold", "§5.log")
	h.Equal("p-held under hold_next 1: its log line", "held 0", fmt.Sprintf("%s %d", l.Str("result"), l.Int("status")),
		why+"; its log line says held with status 0, as no answer has been sent (CONTRACT §5)")
	h.Clause("§5.faults.hold")
	o := h.HTTP(http.MethodGet, rcv.URL+"/orders/p-held", "")
	h.Equal("while its answer is held, p-held is already applied", "200 qty=5", fmt.Sprintf("%d qty=%s", o.Status, o.Member("qty")),
		why+": committed first, then held")

	h.Clause("§5.faults.hold-sigterm")
	why = "CONTRACT §5: a graceful stop (SIGTERM) drops the held connection without an answer: the sender sees a reset and retries, and the retry is a duplicate"
	rcv.Terminate()
	held.SetReadDeadline(time.Now().Add(h.WaitLimit))
	resp, err := http.ReadResponse(bufio.NewReader(held), nil)
	var ne net.Error
	switch {
	case err == nil:
		resp.Body.Close()
		h.Check("after SIGTERM the held connection ends with no answer", false, "the connection closed or reset, no HTTP answer",
			fmt.Sprintf("an answer: %s", resp.Status), why)
	case errors.As(err, &ne) && ne.Timeout():
		h.Timeout("after SIGTERM the held connection ends", "closed within "+h.WaitLimit.String(), "still open", why)
	default:
		h.Check("after SIGTERM the held connection ends with no answer", true, "", "closed without an answer: "+err.Error(), why)
	}
	held.Close()
	code, sig := rcv.Wait("a receiver stops on SIGTERM")
	h.Narrate("receiver after SIGTERM: %s", harness.ExitText(code, sig))
}

// rawPost sends one POST /orders on a connection of its own and leaves the
// answer unread; the connection closes when the step ends.
func rawPost(h *harness.Harness, base, body string) net.Conn {
	addr := strings.TrimPrefix(base, "http://")
	c, err := net.DialTimeout("tcp", addr, h.WaitLimit)
	if err == nil {
		h.OnCleanup(func() { c.Close() })
		c.SetWriteDeadline(time.Now().Add(h.WaitLimit))
		_, err = io.WriteString(c, rawOrder(addr, body))
	}
	if err != nil && harness.WaitedOut(err) {
		h.Timeout("POST /orders "+body, "the request sent within "+h.WaitLimit.String(), err.Error(), "the receiver must take it")
	}
	if err != nil {
		h.Fatalf("POST /orders "+body, "the request sent", "the receiver must take it", "%v", err)
	}
	h.Action("POST /orders "+body+" on a connection of its own", result.NoClock)
	return c
}

// bindFirst: a receiver whose address is taken refuses to start and leaves
// no file behind (CONTRACT §5: every flag checked, and the address bound,
// before any file is touched).
func bindFirst(h *harness.Harness) {
	h.Clause("§5.start.order")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		h.Fatalf("the harness takes a port", "a listener", "", "%v", err)
	}
	h.OnCleanup(func() { ln.Close() })
	db := filepath.Join(h.Dir, "receiver-q.db")
	p := h.Start("receiver-q", result.LaneReceiver, "receiver", result.NoClock, harness.DescribeRequest,
		"--db", db, "--addr", ln.Addr().String())
	why := "CONTRACT §5: the address is bound before any file is touched, so a refused start — here the port is taken — creates nothing: " +
		"a service manager retrying a receiver that cannot bind must not litter empty databases"
	code, sig := p.Wait("a receiver that cannot bind its address ends by itself")
	h.Check("`receiver --addr "+ln.Addr().String()+"` (a port the harness holds) refuses to start", code != 0 || sig != "",
		"a non-zero exit", harness.ExitText(code, sig)+p.StderrHint(), why)
	h.Check("…and prints nothing on stdout", len(p.Lines()) == 0, "empty stdout", fmt.Sprintf("%d line(s)", len(p.Lines())), why)
	for _, suffix := range []string{"", "-journal", "-wal"} {
		_, err := os.Stat(db + suffix)
		h.Equal("…and creates no file "+filepath.Base(db+suffix), "absent", harness.Presence(err), why)
	}

	h.Clause("§5.start.file")
	dir := filepath.Join(h.Dir, "no-such-dir")
	p = h.Start("receiver-q2", result.LaneReceiver, "receiver", result.NoClock, harness.DescribeRequest,
		"--db", filepath.Join(dir, "receiver.db"), "--addr", "127.0.0.1:0")
	why = "CONTRACT §5, §6: the receiver creates its file if missing, not its directory: a missing directory is exit 4"
	if p.WaitLines(func(lines []harness.Line) bool { return len(lines) > 0 }) == harness.CondHeld {
		first := p.Lines()[0].Text
		p.Kill()
		h.Check("`receiver --db no-such-dir/receiver.db` is refused", false, "exit 4, before it listens",
			fmt.Sprintf("it started and printed %q", harness.Trim(first)), why)
	}
	code, sig = p.Wait("a receiver refused at start ends by itself")
	h.Check("`receiver --db no-such-dir/receiver.db` is refused", code == 4 && sig == "", "exit 4", harness.ExitText(code, sig)+p.StderrHint(), why)
	_, err = os.Stat(dir)
	h.Equal("…and the directory was not created", "absent", harness.Presence(err), why)
}

// baseURL: --url is a base address; a path it carries is kept and /orders
// appended (CONTRACT §4: the order goes to URL/orders).
func baseURL(h *harness.Harness) {
	h.Clause("§4.url")
	h.UseQueue("queue-r.db")
	h.Init()
	h.MustEnqueue("r-1", 7, t0)
	fake := h.StartFakeReceiver()
	run := h.RunSender("S", harness.SenderOpts{URL: fake.URL + "/shop/v1", Now: t0})
	why := "CONTRACT §4: --url is the receiver's base address and the order goes to URL/orders: a receiver behind a proxy under /shop/v1 gets /shop/v1/orders, not /orders"
	var paths []string
	for _, r := range fake.Requests() {
		paths = append(paths, r.Method+" "+r.Path)
	}
	h.Equal("sender run-once --url "+fake.URL+"/shop/v1: the request", "POST /shop/v1/orders", strings.Join(paths, " | "),
		why+fmt.Sprintf(" (the sender: %s, %s)", run.Events(), run.Exit()))
}

// heldClock: `sender run --now-ms N` holds the clock at N for the whole run
// (CONTRACT §4): every claim's lease_until is N + lease and every finish is
// stamped N, the second job's as the first's.
func heldClock(h *harness.Harness) {
	h.Clause("§4.now")
	h.UseQueue("queue-s.db")
	h.Init()
	fake := h.StartFakeReceiver()
	ids := []string{"s-1", "s-2"}
	for _, id := range ids {
		h.MustEnqueue(id, 7, t0)
		fake.On(id, harness.Answer{Status: 200, Body: `{"ack":true,"duplicate":false,"stock":7}`})
	}
	const now, lease = t0 + 5, 30000
	run := h.RunSender("S", harness.SenderOpts{Mode: "run", URL: fake.URL, Now: now, LeaseMs: lease})
	why := "CONTRACT §4: --now-ms holds the clock still for the whole run, so a run's every timestamp is the one given: a grader (and a test) can predict each lease and each finish"
	var got, want []string
	for _, l := range run.Lines {
		if l.Str("event") == "claimed" {
			got = append(got, fmt.Sprintf("%s lease_until=%d", l.Str("id"), l.Int("lease_until")))
		}
	}
	for _, id := range ids {
		want = append(want, fmt.Sprintf("%s lease_until=%d", id, now+lease))
	}
	for _, id := range ids {
		j := h.MustShow(id).Job
		got = append(got, fmt.Sprintf("%s %s updated_at=%d", id, j.State, j.UpdatedAt))
		want = append(want, fmt.Sprintf("%s done updated_at=%d", id, now))
	}
	h.Equal("sender run --now-ms "+fmt.Sprint(now)+" over two jobs: the claims' lease_until and the finishes' updated_at",
		strings.Join(want, "; "), strings.Join(got, "; "), why+fmt.Sprintf(" (the sender: %s, %s)", run.Events(), run.Exit()))
}

// slowClient: a client that stalls 0.7 s in the middle of its headers, in
// the middle of its body, or between two requests on one keep-alive
// connection is still served (CONTRACT §5: a receiver may bound what one
// client holds, but no bound is under one second). The stall stays under
// the smallest bound allowed, with room for the lab's own writes; when the
// lab held the client a second or more after all (a loaded machine), a
// refused probe is a time-out, not a failure: a receiver bounding clients
// at exactly one second may cut it.
func slowClient(h *harness.Harness) {
	h.Clause("§5.listening")
	rcv := h.StartReceiver("receiver-u.db")
	h.Clause("§5.bounds")
	addr := strings.TrimPrefix(rcv.URL, "http://")
	probeStall(h, addr, "in the middle of its headers", "u-head", stallMidHeaders(slowRequest(addr, "u-head")))
	probeStall(h, addr, "in the middle of its body", "u-body", stallMidBody(slowRequest(addr, "u-body")))
	probeStall(h, addr, "between two requests on one connection", "u-idle", stallBetweenRequests(slowRequest(addr, "u-idle")))
}

// clientStall is how long the slow client pauses.
const clientStall = 700 * time.Millisecond

// slowRequest is the raw POST /orders of order id to the receiver at addr.
func slowRequest(addr, id string) string {
	return rawOrder(addr, fmt.Sprintf(`{"id":%q,"qty":7,"token":1}`, id))
}

// rawOrder is POST /orders carrying body to the receiver at addr, as it
// goes on the wire.
func rawOrder(addr, body string) string {
	return fmt.Sprintf("POST /orders HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", addr, len(body), body)
}

// stallExchange talks to the receiver on c and returns the answer and how
// long the lab held the client before its last byte, from start (or from
// the first answer, between two requests).
type stallExchange func(c net.Conn, br *bufio.Reader, start time.Time) (harness.HTTPAnswer, time.Duration)

// probeStall judges one stalling client. A try the machine stretched to a
// second or more judges nothing (the receiver may cut it): up to three
// tries for one that did not.
func probeStall(h *harness.Harness, addr, what, id string, exchange stallExchange) {
	why := "CONTRACT §5: a receiver may bound what one client can hold, but no bound is under one second: a sender on a slow " +
		"network that pauses 0.7 s is still served"
	h.Section("u: " + what)
	var a harness.HTTPAnswer
	var took time.Duration
	var ok bool
	for try := 1; try <= 3; try++ {
		h.Action(fmt.Sprintf("POST /orders %s, stalling %v %s (try %d)", id, clientStall, what, try), result.NoClock)
		start := time.Now() // a bound on headers may count from the connection
		c, err := net.DialTimeout("tcp", addr, h.WaitLimit)
		if err != nil {
			a, took = harness.HTTPAnswer{Err: err}, 0
		} else {
			c.SetDeadline(time.Now().Add(h.WaitLimit + clientStall))
			a, took = exchange(c, bufio.NewReader(c), start)
			c.Close()
		}
		if errors.Is(a.Err, errNothingToJudge) {
			h.Narrate("· the receiver closes the connection after each answer (Connection: close): no second request on it to judge")
			return
		}
		h.Narrate("→ %s (the client was held %v)", a, took.Round(time.Millisecond))
		if ok = a.Err == nil && a.Status == 200 && a.Ack() == "true"; ok || took < time.Second {
			break
		}
	}
	if !ok && took >= time.Second {
		h.Timeout("a client stalling "+what+" is still served", `200 {"ack":true,…}`,
			fmt.Sprintf("%s after a stall that took %v instead of %v", a, took.Round(time.Millisecond), clientStall), why)
		return
	}
	h.ExpectAnswered("a client stalling "+what+" is answered", `200 {"ack":true,…}`, why, a)
	h.Check("a client stalling "+what+" is still served", ok, `200 {"ack":true,…}`, a.String(), why)
}

// sendStalled writes req in two pieces, stalling between them, and reads
// the answer.
func sendStalled(c net.Conn, br *bufio.Reader, req string, cut int, start time.Time) (harness.HTTPAnswer, time.Duration) {
	if _, err := io.WriteString(c, req[:cut]); err != nil {
		return harness.HTTPAnswer{Err: err}, time.Since(start)
	}
	time.Sleep(clientStall)
	_, err := io.WriteString(c, req[cut:])
	took := time.Since(start)
	if err != nil {
		return harness.HTTPAnswer{Err: err}, took
	}
	return readAnswer(br), took
}

// stallMidHeaders stalls after the request line.
func stallMidHeaders(req string) stallExchange {
	return func(c net.Conn, br *bufio.Reader, start time.Time) (harness.HTTPAnswer, time.Duration) {
		return sendStalled(c, br, req, strings.Index(req, "\r\n")+2, start)
	}
}

// stallMidBody stalls after the body's first byte.
func stallMidBody(req string) stallExchange {
	return func(c net.Conn, br *bufio.Reader, start time.Time) (harness.HTTPAnswer, time.Duration) {
		return sendStalled(c, br, req, strings.Index(req, "\r\n\r\n")+5, start)
	}
}

// stallBetweenRequests sends req once, reads the answer, stalls on the
// idle connection and sends req again.
func stallBetweenRequests(req string) stallExchange {
	return func(c net.Conn, br *bufio.Reader, _ time.Time) (harness.HTTPAnswer, time.Duration) {
		if _, err := io.WriteString(c, req); err != nil {
			return harness.HTTPAnswer{Err: err}, 0
		}
		// The receiver's idle time starts when it has answered, which is
		// after this: counting from here overstates the lab's hold, never
		// understates it.
		sent := time.Now()
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			return harness.HTTPAnswer{Err: fmt.Errorf("the first request: %w", err)}, 0
		}
		io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
		resp.Body.Close()
		if resp.Close {
			// Closing after each answer is the receiver's right; there
			// is then no second request on this connection to judge.
			return harness.HTTPAnswer{Err: errNothingToJudge}, 0
		}
		return sendStalled(c, br, req, 0, sent)
	}
}

// errNothingToJudge: a probe found nothing the contract asks of it.
var errNothingToJudge = errors.New("nothing to judge")

// readAnswer reads one HTTP answer from br.
func readAnswer(br *bufio.Reader) harness.HTTPAnswer {
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return harness.HTTPAnswer{Err: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	return harness.HTTPAnswer{Status: resp.StatusCode, Body: strings.TrimSpace(string(b)), Err: err}
}
