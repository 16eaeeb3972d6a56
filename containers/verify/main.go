// Command verify checks the crash-after-receipt scenario (lab step 8) from
// inside a container, where there is no shell and no curl: it speaks to the
// receiver over HTTP (CONTRACT.md §5) and reads the queue through the
// queuectl binary of the image (§3), so it judges any implementation, not
// only the reference one. Every check prints what was expected and what was
// observed; the exit code is 0 when all hold.
//
//	verify wait-ready URL [--timeout-ms 60000]
//	verify wait-reclaimable --db FILE --id ID --receiver URL [--token 1] [--timeout-ms 60000]
//	verify outcome --db FILE --id ID --receiver URL [--qty 7] [--token 2] [--stale-token 1] [--requests 2]
//
// wait-ready polls URL until it answers 2xx: compose's readiness gate.
// wait-reclaimable waits until the receiver has counted a request for ID,
// the job is still leased under --token (its sender died after the receipt,
// before finish), and the real clock has reached the lease's end, so that
// the next claim is a reclaim. outcome checks the end state: stock +qty once,
// the request counted --requests times, the job done under --token, and a
// late finish with --stale-token refused (queuectl exit 12) without a write.
//
// Exit codes: 0 satisfied, 1 a check failed or a wait ran out of time,
// 2 usage.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

const usage = `usage:
  verify wait-ready URL [--timeout-ms 60000]
  verify wait-reclaimable --db FILE --id ID --receiver URL [--token 1] [--queuectl queuectl] [--timeout-ms 60000]
  verify outcome --db FILE --id ID --receiver URL [--qty 7] [--token 2] [--stale-token 1] [--requests 2] [--queuectl queuectl]`

// pollEvery is how often a wait looks again; each wait is bounded by its
// --timeout-ms deadline.
const pollEvery = 25 * time.Millisecond

// finishNotApplied is queuectl's exit code for a refused finish (CONTRACT §6).
const finishNotApplied = 12

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout)
	stop()
	os.Exit(code)
}

// errUsage ends with exit 2.
var errUsage = errors.New("usage")

func run(ctx context.Context, args []string, out io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(out, usage)
		return 2
	}
	var err error
	switch args[0] {
	case "wait-ready":
		err = waitReady(ctx, args[1:], out)
	case "wait-reclaimable":
		err = waitReclaimable(ctx, args[1:], out)
	case "outcome":
		err = outcome(ctx, args[1:], out)
	case "-h", "--help", "help":
		fmt.Fprintln(out, usage)
		return 0
	default:
		err = fmt.Errorf("%w: unknown mode %q", errUsage, args[0])
	}
	switch {
	case err == nil:
		return 0
	case errors.Is(err, errUsage):
		fmt.Fprintf(out, "verify: %v\n%s\n", err, usage)
		return 2
	default:
		fmt.Fprintf(out, "verify: %v\n", err)
		return 1
	}
}

// config holds every mode's flags; each mode requires its own.
type config struct {
	db, id, receiver, queuectl   string
	qty, token, staleToken, reqs int64
	timeout                      time.Duration
	positional                   []string
}

func parse(mode string, args []string, required ...string) (config, error) {
	var c config
	var timeoutMS int64
	fs := flag.NewFlagSet(mode, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&c.db, "db", "", "queue database `file`")
	fs.StringVar(&c.id, "id", "", "order `id`")
	fs.StringVar(&c.receiver, "receiver", "", "receiver base `URL`")
	fs.StringVar(&c.queuectl, "queuectl", "queuectl", "queuectl `executable`")
	fs.Int64Var(&c.qty, "qty", 7, "the order's quantity")
	fs.Int64Var(&c.token, "token", 0, "expected fencing token")
	fs.Int64Var(&c.staleToken, "stale-token", 1, "token of the late finish that must be refused")
	fs.Int64Var(&c.reqs, "requests", 2, "requests the receiver must have counted for id")
	fs.Int64Var(&timeoutMS, "timeout-ms", 60000, "deadline of a wait")
	// Flags may follow the positional URL of wait-ready.
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return c, fmt.Errorf("%w: %s: %v", errUsage, mode, err)
		}
		if fs.NArg() == 0 {
			break
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
	c.positional = pos
	if mode != "wait-ready" && len(pos) > 0 {
		return c, fmt.Errorf("%w: %s: unexpected argument %q", errUsage, mode, pos[0])
	}
	c.timeout = time.Duration(timeoutMS) * time.Millisecond
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	for _, r := range required {
		if !set[r] {
			return c, fmt.Errorf("%w: %s: --%s is required", errUsage, mode, r)
		}
	}
	if timeoutMS < 1 {
		return c, fmt.Errorf("%w: %s: --timeout-ms must be positive", errUsage, mode)
	}
	if c.receiver != "" {
		if u, err := url.Parse(c.receiver); err != nil || u.Scheme != "http" || u.Host == "" {
			return c, fmt.Errorf("%w: %s: --receiver %q: want http://HOST:PORT", errUsage, mode, c.receiver)
		}
		c.receiver = strings.TrimRight(c.receiver, "/")
	}
	return c, nil
}

var client = &http.Client{Timeout: 5 * time.Second}

// getJSON GETs url and decodes a 200 answer into v; it returns the status.
func getJSON(ctx context.Context, url string, v any) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return resp.StatusCode, err
	}
	if resp.StatusCode != http.StatusOK || v == nil {
		return resp.StatusCode, nil
	}
	if err := json.Unmarshal(body, v); err != nil {
		return resp.StatusCode, fmt.Errorf("GET %s: %v in %q", url, err, body)
	}
	return resp.StatusCode, nil
}

// poll calls try every pollEvery until it reports done, fails, or the
// deadline passes; the last "not yet" reason goes into the timeout error.
func poll(ctx context.Context, timeout time.Duration, what string, try func() (done bool, why string, err error)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	for {
		done, why, err := try()
		if err != nil || done {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: not reached within %v (last seen: %s)", what, timeout, why)
		case <-tick.C:
		}
	}
}

func waitReady(ctx context.Context, args []string, out io.Writer) error {
	c, err := parse("wait-ready", args)
	if err != nil {
		return err
	}
	if len(c.positional) != 1 {
		return fmt.Errorf("%w: wait-ready takes exactly one URL", errUsage)
	}
	target := c.positional[0]
	start := time.Now()
	err = poll(ctx, c.timeout, "GET "+target+" answers 2xx", func() (bool, string, error) {
		status, err := getJSON(ctx, target, nil)
		if err != nil {
			return false, err.Error(), nil
		}
		return status >= 200 && status < 300, fmt.Sprintf("status %d", status), nil
	})
	if err == nil {
		fmt.Fprintf(out, "ready: GET %s answered 2xx after %v\n", target, time.Since(start).Round(time.Millisecond))
	}
	return err
}

// job is the part of CONTRACT §3's JOB the checks read.
type job struct {
	ID         string  `json:"id"`
	Qty        int64   `json:"qty"`
	State      string  `json:"state"`
	Reason     *string `json:"reason"`
	Attempts   int64   `json:"attempts"`
	Token      int64   `json:"token"`
	Owner      *string `json:"owner"`
	LeaseUntil *int64  `json:"lease_until"`
	UpdatedAt  int64   `json:"updated_at"`
}

// queuectl runs a verb with --json and returns its exit code and stdout.
func queuectl(ctx context.Context, c config, verb string, args ...string) (int, []byte, error) {
	full := append([]string{verb, "--db", c.db, "--json"}, args...)
	cmd := exec.CommandContext(ctx, c.queuectl, full...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, stdout.Bytes(), nil
	case errors.As(err, &ee) && ee.Exited():
		return ee.ExitCode(), stdout.Bytes(), nil
	default:
		return -1, nil, fmt.Errorf("queuectl %s: %v %s", strings.Join(full, " "), err, strings.TrimSpace(stderr.String()))
	}
}

func show(ctx context.Context, c config) (job, error) {
	code, stdout, err := queuectl(ctx, c, "show", "--id", c.id)
	if err != nil {
		return job{}, err
	}
	if code != 0 {
		return job{}, fmt.Errorf("queuectl show --id %s exited %d", c.id, code)
	}
	var v struct {
		Job *job `json:"job"`
	}
	if err := json.Unmarshal(stdout, &v); err != nil || v.Job == nil {
		return job{}, fmt.Errorf("queuectl show: want {\"job\":JOB}, got %q", stdout)
	}
	return *v.Job, nil
}

// order is GET /orders/ID's answer.
type order struct {
	ID       string `json:"id"`
	Qty      int64  `json:"qty"`
	Token    int64  `json:"token"`
	Requests int64  `json:"requests"`
}

func waitReclaimable(ctx context.Context, args []string, out io.Writer) error {
	c, err := parse("wait-reclaimable", args, "db", "id", "receiver")
	if err != nil {
		return err
	}
	if c.token == 0 {
		c.token = 1
	}
	var j job
	var o order
	err = poll(ctx, c.timeout, fmt.Sprintf("a request for %s received while the job stays leased under token %d", c.id, c.token), func() (bool, string, error) {
		status, err := getJSON(ctx, c.receiver+"/orders/"+url.PathEscape(c.id), &o)
		if err != nil {
			return false, err.Error(), nil
		}
		if status != http.StatusOK || o.Requests < 1 {
			return false, fmt.Sprintf("receiver: GET /orders/%s status %d, %d requests", c.id, status, o.Requests), nil
		}
		if j, err = show(ctx, c); err != nil {
			return false, err.Error(), nil
		}
		switch {
		case j.State == "leased" && j.Token == c.token && j.LeaseUntil != nil:
			return true, "", nil
		case j.State == "pending" || (j.State == "leased" && j.Token < c.token):
			return false, fmt.Sprintf("job %s token %d", j.State, j.Token), nil
		}
		// The sender finished, or someone else claimed: this is not a
		// crash after the receipt, and waiting will not make it one.
		return false, "", fmt.Errorf("expected job %s leased under token %d after the receipt (its sender exits before finish), observed %s token %d",
			c.id, c.token, describe(j), j.Token)
	})
	if err != nil {
		return err
	}
	owner := "?"
	if j.Owner != nil {
		owner = *j.Owner
	}
	fmt.Fprintf(out, "observed: receiver counted %d request(s) for %s; job leased by %s under token %d until %d\n",
		o.Requests, c.id, owner, j.Token, *j.LeaseUntil)
	// The lease is a time, not an event: the next claim is a reclaim once
	// the real clock reaches lease_until (the expiry instant is expired).
	end := time.UnixMilli(*j.LeaseUntil)
	fmt.Fprintf(out, "waiting %v for the lease to end\n", max(0, time.Until(end)).Round(time.Millisecond))
	if time.Until(end) > c.timeout {
		return fmt.Errorf("the lease ends in %v, past --timeout-ms", time.Until(end))
	}
	for time.Now().Before(end) {
		timer := time.NewTimer(time.Until(end))
		select {
		case <-ctx.Done():
			timer.Stop()
			return ctx.Err()
		case <-timer.C:
		}
	}
	fmt.Fprintf(out, "lease of token %d ended at %d: the job is reclaimable\n", j.Token, *j.LeaseUntil)
	return nil
}

func describe(j job) string {
	s := j.State
	if j.Reason != nil {
		s += " (" + *j.Reason + ")"
	}
	return s
}

// checks prints one line per check and counts the failures.
type checks struct {
	out    io.Writer
	failed int
	total  int
}

func (k *checks) check(what string, expected, observed any) {
	k.total++
	e, o := fmt.Sprint(expected), fmt.Sprint(observed)
	mark := "ok  "
	if e != o {
		k.failed++
		mark = "FAIL"
	}
	fmt.Fprintf(k.out, "%s %-58s expected %-14s observed %s\n", mark, what, e, o)
}

func nullable[T any](p *T) string {
	if p == nil {
		return "null"
	}
	return fmt.Sprint(*p)
}

func outcome(ctx context.Context, args []string, out io.Writer) error {
	c, err := parse("outcome", args, "db", "id", "receiver")
	if err != nil {
		return err
	}
	if c.token == 0 {
		c.token = 2
	}
	k := &checks{out: out}

	var stock struct {
		Stock    int64            `json:"stock"`
		Orders   int64            `json:"orders"`
		Requests map[string]int64 `json:"requests"`
	}
	if status, err := getJSON(ctx, c.receiver+"/stock", &stock); err != nil || status != http.StatusOK {
		return fmt.Errorf("GET %s/stock: status %d, %v", c.receiver, status, err)
	}
	k.check("receiver stock (the order applied once)", c.qty, stock.Stock)
	k.check("receiver orders", 1, stock.Orders)
	k.check(fmt.Sprintf("requests counted for %s (A's and B's)", c.id), c.reqs, stock.Requests[c.id])

	var o order
	status, err := getJSON(ctx, c.receiver+"/orders/"+url.PathEscape(c.id), &o)
	if err != nil {
		return err
	}
	k.check(fmt.Sprintf("GET /orders/%s status", c.id), http.StatusOK, status)
	k.check("order qty", c.qty, o.Qty)
	k.check("order recorded under the first token (B's was a duplicate)", c.staleToken, o.Token)

	before, err := show(ctx, c)
	if err != nil {
		return err
	}
	k.check("job state", "done", describe(before))
	k.check("job token (B's reclaim)", c.token, before.Token)
	k.check("job attempts (A's lost attempt counts)", c.token, before.Attempts)
	k.check("job owner", "null", nullable(before.Owner))
	k.check("job lease_until", "null", nullable(before.LeaseUntil))
	k.check("job qty", c.qty, before.Qty)

	// The late finish is a write attempt. Where the fence would let it
	// through (the job still leased under the stale token), it would destroy
	// the very state being judged: report that instead of doing it.
	if before.State == "leased" && before.Token == c.staleToken {
		k.check(fmt.Sprintf("late finish with token %d: not attempted, it would apply", c.staleToken),
			"job not leased under token "+fmt.Sprint(c.staleToken), "leased under token "+fmt.Sprint(before.Token))
		return fmt.Errorf("%d of %d checks failed", k.failed, k.total)
	}
	code, stdout, err := queuectl(ctx, c, "finish", "--id", c.id, "--token", fmt.Sprint(c.staleToken), "--outcome", "ok")
	if err != nil {
		return err
	}
	var fin struct {
		Applied *bool `json:"applied"`
	}
	_ = json.Unmarshal(stdout, &fin)
	k.check(fmt.Sprintf("late finish with token %d: queuectl exit", c.staleToken), finishNotApplied, code)
	k.check(fmt.Sprintf("late finish with token %d: applied", c.staleToken), false, nullable(fin.Applied))

	after, err := show(ctx, c)
	if err != nil {
		return err
	}
	k.check("job after the late finish: unchanged", fmt.Sprintf("%+v", summary(before)), fmt.Sprintf("%+v", summary(after)))

	if k.failed > 0 {
		return fmt.Errorf("%d of %d checks failed", k.failed, k.total)
	}
	fmt.Fprintf(out, "verify: outcome satisfied (%d checks)\n", k.total)
	return nil
}

// summary is what a refused finish must leave exactly as it was.
func summary(j job) string {
	return fmt.Sprintf("%s/token=%d/attempts=%d/updated_at=%d", describe(j), j.Token, j.Attempts, j.UpdatedAt)
}
