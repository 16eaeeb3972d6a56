package main_test

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"snacklab/internal/testbin"

	"snacklab/internal/tier"
	"snacklab/queue"
)

const (
	now   = int64(1_700_000_000_000)
	lease = int64(30_000)
)

// bin is the sender binary, built once for every test in TestMain.
func bin() string { return testbin.Path("sender") }

func TestMain(m *testing.M) {
	testbin.Main(m, "sender")
}

// newQueue creates a queue file holding the given jobs, each qty 7, and
// returns its path and an open handle for checking it.
func newQueue(t *testing.T, ids ...string) (string, *queue.Queue) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "queue.db")
	q, err := queue.Open(path, queue.Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.Close() })
	for _, id := range ids {
		if _, _, err := q.Enqueue(context.Background(), queue.NewJob{ID: id, Qty: 7, MaxAttempts: 5, DeadlineWindowMs: 86_400_000}, now); err != nil {
			t.Fatal(err)
		}
	}
	return path, q
}

func getJob(t *testing.T, q *queue.Queue, id string) queue.Job {
	t.Helper()
	job, err := q.Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return job
}

// receiver is an httptest stand-in for the real receiver: it counts requests
// and answers each with status and body.
type receiver struct {
	*httptest.Server
	requests atomic.Int32
}

func newReceiver(t *testing.T, status int, body string) *receiver {
	t.Helper()
	r := &receiver{}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.requests.Add(1)
		io.Copy(io.Discard, req.Body)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		io.WriteString(w, body)
	}))
	t.Cleanup(r.Close)
	return r
}

// runSender runs the binary to completion and returns its output and exit code.
func runSender(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin(), args...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee) && ee.Exited():
		code = ee.ExitCode()
	default:
		t.Fatalf("sender %v: %v (stderr %q)", args, err, errOut.String())
	}
	return out.String(), errOut.String(), code
}

func senderArgs(verb, db, url, owner string, extra ...string) []string {
	return append([]string{verb, "--db", db, "--url", url, "--owner", owner,
		"--now-ms", strconv.FormatInt(now, 10), "--json"}, extra...)
}

func TestRunOnceEvents(t *testing.T) {
	lu := strconv.FormatInt(now+lease, 10)
	claimed := `{"event":"claimed","id":"o-1","qty":7,"token":1,"attempt":1,"lease_until":` + lu + `}`
	for _, tc := range []struct {
		name      string
		jobs      []string
		status    int
		body      string
		wantCode  int
		wantLines []string
		wantState queue.State
	}{
		{"ok", []string{"o-1"}, 200, `{"ack":true,"duplicate":false,"stock":7}`, 0, []string{
			`{"event":"claiming","owner":"A"}`, claimed,
			`{"event":"response","id":"o-1","token":1,"status":200,"ack":true}`,
			`{"event":"finished","id":"o-1","token":1,"class":"ok","applied":true,"state":"done","reason":null}`,
		}, queue.Done},
		{"retry", []string{"o-1"}, 503, `{"ack":false}`, 0, []string{
			`{"event":"claiming","owner":"A"}`, claimed,
			`{"event":"response","id":"o-1","token":1,"status":503,"ack":false}`,
			`{"event":"finished","id":"o-1","token":1,"class":"retryable","applied":true,"state":"pending","reason":null}`,
		}, queue.Pending},
		{"permanent", []string{"o-1"}, 422, `{"ack":false,"error":"rejected"}`, 0, []string{
			`{"event":"claiming","owner":"A"}`, claimed,
			`{"event":"response","id":"o-1","token":1,"status":422,"ack":false}`,
			`{"event":"finished","id":"o-1","token":1,"class":"permanent","applied":true,"state":"dead","reason":"permanent"}`,
		}, queue.Dead},
		{"bad ack", []string{"o-1"}, 200, `{"ack":1}`, 20, []string{
			`{"event":"claiming","owner":"A"}`, claimed,
			`{"event":"response","id":"o-1","token":1,"status":200,"ack":1}`,
		}, queue.Leased},
		{"unexpected", []string{"o-1"}, 302, ``, 21, []string{
			`{"event":"claiming","owner":"A"}`, claimed,
			`{"event":"response","id":"o-1","token":1,"status":302,"ack":null}`,
		}, queue.Leased},
		{"empty", nil, 200, `{"ack":true}`, 13, []string{
			`{"event":"claiming","owner":"A"}`, `{"event":"empty"}`,
		}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db, q := newQueue(t, tc.jobs...)
			srv := newReceiver(t, tc.status, tc.body)

			stdout, stderr, code := runSender(t, senderArgs("run-once", db, srv.URL, "A")...)

			if got, want := code, tc.wantCode; got != want {
				t.Fatalf("exit code = %d, want %d (stderr %q)", got, want, stderr)
			}
			if got, want := stdout, strings.Join(tc.wantLines, "\n")+"\n"; got != want {
				t.Errorf("stdout =\n%s\nwant\n%s", got, want)
			}
			if code == 0 || code == 13 {
				if stderr != "" {
					t.Errorf("stderr = %q, want nothing", stderr)
				}
			} else if got := strings.Count(stderr, "\n"); got != 1 {
				t.Errorf("stderr has %d lines, want 1: %q", got, stderr)
			}
			if tc.jobs != nil {
				if got, want := getJob(t, q, "o-1").State, tc.wantState; got != want {
					t.Errorf("state = %s, want %s", got, want)
				}
			}
		})
	}
}

func TestRunOnceHumanOutput(t *testing.T) {
	db, _ := newQueue(t, "o-1")
	srv := newReceiver(t, 200, `{"ack":true}`)
	args := []string{"run-once", "--db", db, "--url", srv.URL, "--owner", "A", "--now-ms", strconv.FormatInt(now, 10)}

	stdout, stderr, code := runSender(t, args...)

	if got, want := code, 0; got != want {
		t.Fatalf("exit code = %d, want %d (stderr %q)", got, want, stderr)
	}
	want := fmt.Sprintf("claiming as A\nclaimed o-1 qty=7 token=1 attempt=1 lease_until=%d\n"+
		"response o-1 token=1 status=200 ack=true\nfinished o-1 token=1 class=ok applied=true state=done\n", now+lease)
	if got := stdout; got != want {
		t.Errorf("stdout =\n%s\nwant\n%s", got, want)
	}
}

// TestCrashAfterReceiptThenReclaim is the lab's story in one test: A dies
// right after the receiver answered, B reclaims at the lease's expiry instant
// with token 2 and finishes, and A's token 1 is stale from then on.
func TestCrashAfterReceiptThenReclaim(t *testing.T) {
	db, q := newQueue(t, "o-1")
	srv := newReceiver(t, 200, `{"ack":true}`)

	stdout, stderr, code := runSender(t, senderArgs("run-once", db, srv.URL, "A", "--exit-after-receipt", "73")...)

	if got, want := code, 73; got != want {
		t.Fatalf("A exit code = %d, want %d (stderr %q)", got, want, stderr)
	}
	if got, want := srv.requests.Load(), int32(1); got != want {
		t.Fatalf("requests after A = %d, want %d", got, want)
	}
	if !strings.HasSuffix(stdout, `{"event":"response","id":"o-1","token":1,"status":200,"ack":true}`+"\n") {
		t.Errorf("A's output does not end with its response event:\n%s", stdout)
	}
	job := getJob(t, q, "o-1")
	if got, want := job.State, queue.Leased; got != want {
		t.Fatalf("state after A = %s, want %s", got, want)
	}
	if got, want := job.Token, int64(1); got != want {
		t.Fatalf("token after A = %d, want %d", got, want)
	}
	if got, want := job.Owner, "A"; got != want {
		t.Fatalf("owner after A = %q, want %q", got, want)
	}

	// One millisecond early, the lease still holds.
	early := strconv.FormatInt(job.LeaseUntil-1, 10)
	_, stderr, code = runSender(t, "run-once", "--db", db, "--url", srv.URL, "--owner", "B", "--now-ms", early, "--json")
	if got, want := code, 13; got != want {
		t.Fatalf("B before expiry: exit code = %d, want %d (stderr %q)", got, want, stderr)
	}

	at := strconv.FormatInt(job.LeaseUntil, 10)
	stdout, stderr, code = runSender(t, "run-once", "--db", db, "--url", srv.URL, "--owner", "B", "--now-ms", at, "--json")
	if got, want := code, 0; got != want {
		t.Fatalf("B exit code = %d, want %d (stderr %q)", got, want, stderr)
	}
	if want := `{"event":"claimed","id":"o-1","qty":7,"token":2,"attempt":2,"lease_until":` +
		strconv.FormatInt(job.LeaseUntil+lease, 10) + `}`; !strings.Contains(stdout, want) {
		t.Errorf("B's output lacks %s:\n%s", want, stdout)
	}
	if got, want := srv.requests.Load(), int32(2); got != want {
		t.Errorf("requests after B = %d, want %d", got, want)
	}
	job = getJob(t, q, "o-1")
	if got, want := job.State, queue.Done; got != want {
		t.Errorf("state after B = %s, want %s", got, want)
	}
	if got, want := job.Token, int64(2); got != want {
		t.Errorf("token after B = %d, want %d", got, want)
	}

	_, applied, err := q.Finish(context.Background(), "o-1", 1, queue.OutcomeOK, job.LeaseUntil+1)
	if err != nil {
		t.Fatal(err)
	}
	if applied {
		t.Errorf("late finish with token 1 applied, want refused")
	}
}

func TestBadInput(t *testing.T) {
	dir := t.TempDir()
	garbage := filepath.Join(dir, "garbage.db")
	garbageBytes := []byte("this is not a sqlite database, just some snack crumbs\n")
	if err := os.WriteFile(garbage, garbageBytes, 0o644); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "empty.db")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing.db")
	db, q := newQueue(t, "o-1")
	srv := newReceiver(t, 200, `{"ack":true}`)
	ok := func(extra ...string) []string {
		return append([]string{"run-once", "--db", db, "--url", srv.URL, "--owner", "A"}, extra...)
	}

	for _, tc := range []struct {
		name string
		args []string
		want int
	}{
		{"no subcommand", nil, 2},
		{"unknown subcommand", []string{"deliver", "--db", db}, 2},
		{"unknown flag", ok("--speed", "9"), 2},
		{"missing owner", []string{"run-once", "--db", db, "--url", srv.URL}, 2},
		{"missing db", []string{"run", "--url", srv.URL, "--owner", "A"}, 2},
		{"malformed lease", ok("--lease-ms", "soon"), 2},
		{"stray argument", ok("now"), 2},
		{"owner with space", ok("--owner", "A B"), 3},
		{"owner too long", ok("--owner", strings.Repeat("a", 65)), 3},
		{"owner non-ASCII", ok("--owner", "Bé"), 3},
		{"lease zero", ok("--lease-ms", "0"), 3},
		{"lease over a day", ok("--lease-ms", "86400001"), 3},
		{"negative now", ok("--now-ms", "-1"), 3},
		{"exit code zero", ok("--exit-after-receipt", "0"), 3},
		{"exit code 126", ok("--exit-after-receipt", "126"), 3},
		{"url not http", ok("--url", "ftp://127.0.0.1:1"), 3},
		{"timeout zero", ok("--timeout-ms", "0"), 3},
		{"timeout over a day", ok("--timeout-ms", "86400001"), 3},
		{"negative busy timeout", ok("--busy-timeout-ms", "-1"), 3},
		{"busy timeout over a day", ok("--busy-timeout-ms", "86400001"), 3},
		{"batch zero", ok("--batch", "0"), 3},
		{"batch over the bound", ok("--batch", "1001"), 3},
		{"batch malformed", ok("--batch", "08"), 2},
		{"db missing", []string{"run-once", "--db", missing, "--url", srv.URL, "--owner", "A"}, 4},
		{"db garbage", []string{"run", "--db", garbage, "--url", srv.URL, "--owner", "A"}, 5},
		{"db empty file", []string{"run-once", "--db", empty, "--url", srv.URL, "--owner", "A"}, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stdout, stderr, code := runSender(t, tc.args...)

			if got, want := code, tc.want; got != want {
				t.Fatalf("exit code = %d, want %d (stderr %q)", got, want, stderr)
			}
			if stdout != "" {
				t.Errorf("stdout = %q, want nothing", stdout)
			}
			if got := strings.Count(stderr, "\n"); got != 1 || !strings.HasPrefix(stderr, "sender: ") {
				t.Errorf("stderr = %q, want one line starting with \"sender: \"", stderr)
			}
			if code == 2 && !strings.Contains(stderr, "Try:") {
				t.Errorf("usage error without a Try: hint: %q", stderr)
			}
		})
	}

	if _, err := os.Stat(missing); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing db: stat = %v, want it still missing", err)
	}
	if got, err := os.ReadFile(garbage); err != nil || !bytes.Equal(got, garbageBytes) {
		t.Errorf("garbage db changed: %q, %v", got, err)
	}
	if got, err := os.ReadFile(empty); err != nil || len(got) != 0 {
		t.Errorf("empty db changed: %d bytes, %v", len(got), err)
	}
	job := getJob(t, q, "o-1")
	if got, want := job.State, queue.Pending; got != want {
		t.Errorf("state = %s, want %s", got, want)
	}
	if got, want := job.Token, int64(0); got != want {
		t.Errorf("token = %d, want %d", got, want)
	}
	if got, want := srv.requests.Load(), int32(0); got != want {
		t.Errorf("requests = %d, want %d", got, want)
	}
}

// lineReader reads a process's stdout a line at a time, failing the test
// rather than hanging when a line does not come.
type lineReader struct {
	lines chan string
	done  chan struct{}
}

func newLineReader(r io.Reader) *lineReader {
	lr := &lineReader{lines: make(chan string, 64), done: make(chan struct{})}
	go func() {
		defer close(lr.done)
		defer close(lr.lines)
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			lr.lines <- sc.Text()
		}
	}()
	return lr
}

// next returns the next line, or "" and false at the end of the output.
func (lr *lineReader) next(t *testing.T, deadline time.Duration) (string, bool) {
	t.Helper()
	select {
	case line, ok := <-lr.lines:
		return line, ok
	case <-time.After(deadline):
		t.Fatalf("no output line within %v", deadline)
		return "", false
	}
}

// rest returns every remaining line.
func (lr *lineReader) rest(t *testing.T, deadline time.Duration) []string {
	t.Helper()
	var lines []string
	for {
		line, ok := lr.next(t, deadline)
		if !ok {
			return lines
		}
		lines = append(lines, line)
	}
}

// TestTwoProcessesRaceToClaim starts two real senders against one job, held
// at the starting line by the file's write lock, and releases them together:
// exactly one must get the job, under token 1.
func TestTwoProcessesRaceToClaim(t *testing.T) {
	tier.Slow(t)
	rounds := 50
	if testing.Short() {
		rounds = 5
	}
	srv := newReceiver(t, 200, `{"ack":true}`)
	for round := range rounds {
		db, q := newQueue(t, "o-1")
		before := srv.requests.Load()

		lock, err := sql.Open("sqlite", "file:"+db+"?_pragma=busy_timeout(10000)")
		if err != nil {
			t.Fatal(err)
		}
		conn, err := lock.Conn(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := conn.ExecContext(context.Background(), "BEGIN IMMEDIATE"); err != nil {
			t.Fatal(err)
		}

		type proc struct {
			cmd    *exec.Cmd
			out    *lineReader
			stderr bytes.Buffer
		}
		var procs [2]*proc
		for i, owner := range []string{"A", "B"} {
			p := &proc{cmd: exec.Command(bin(), senderArgs("run-once", db, srv.URL, owner, "--busy-timeout-ms", "20000")...)}
			p.cmd.Stderr = &p.stderr
			stdout, err := p.cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := p.cmd.Start(); err != nil {
				t.Fatal(err)
			}
			p.out = newLineReader(stdout)
			procs[i] = p
		}
		for i, p := range procs {
			line, _ := p.out.next(t, 20*time.Second)
			if want := fmt.Sprintf(`{"event":"claiming","owner":"%s"}`, []string{"A", "B"}[i]); line != want {
				t.Fatalf("round %d: first line %q, want %q", round, line, want)
			}
		}
		if _, err := conn.ExecContext(context.Background(), "ROLLBACK"); err != nil {
			t.Fatal(err)
		}
		conn.Close()
		lock.Close()

		var claimed, empty int
		for _, p := range procs {
			lines := p.out.rest(t, 20*time.Second)
			<-p.out.done
			err := p.cmd.Wait()
			code := 0
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			switch {
			case code == 0 && len(lines) == 3 && strings.HasPrefix(lines[0], `{"event":"claimed","id":"o-1","qty":7,"token":1,`):
				claimed++
			case code == 13 && len(lines) == 1 && lines[0] == `{"event":"empty"}`:
				empty++
			default:
				t.Fatalf("round %d: exit %d, output %q, stderr %q", round, code, lines, p.stderr.String())
			}
		}
		if claimed != 1 || empty != 1 {
			t.Fatalf("round %d: claimed %d, empty %d; want 1 and 1", round, claimed, empty)
		}
		job := getJob(t, q, "o-1")
		if got, want := job.Token, int64(1); got != want {
			t.Fatalf("round %d: token = %d, want %d", round, got, want)
		}
		if got, want := job.State, queue.Done; got != want {
			t.Fatalf("round %d: state = %s, want %s", round, got, want)
		}
		if got, want := srv.requests.Load()-before, int32(1); got != want {
			t.Fatalf("round %d: requests = %d, want %d", round, got, want)
		}
	}
}

// TestRunStopsAfterCurrentJobOnSIGTERM signals `sender run` while its first
// request is in flight: the job in hand is still finished, the loop stops
// without draining the queue, and the exit code is 0.
func TestRunStopsAfterCurrentJobOnSIGTERM(t *testing.T) {
	db, q := newQueue(t, "o-1", "o-2", "o-3", "o-4", "o-5")
	arrived, release := make(chan struct{}, 5), make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		select {
		case arrived <- struct{}{}:
		default:
		}
		<-release
		io.WriteString(w, `{"ack":true}`)
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})

	cmd := exec.Command(bin(), senderArgs("run", db, srv.URL, "A")...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-arrived:
	case <-time.After(20 * time.Second):
		cmd.Process.Kill()
		t.Fatal("first request did not arrive")
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	close(release)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("sender run: %v (stderr %q)", err, stderr.String())
	}

	if got, want := getJob(t, q, "o-1").State, queue.Done; got != want {
		t.Errorf("o-1 state = %s, want %s", got, want)
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	if last := lines[len(lines)-1]; !strings.HasPrefix(last, `{"event":"finished"`) {
		t.Errorf("last event = %s, want a finished event (the queue was not drained)", last)
	}
}

// --batch N: run-once delivers one batch (a claiming, then a claimed, a
// response and a finished per job, in the claim's order) and exits 0; run
// goes on batch after batch until the empty claim; an empty queue is exit
// 13 for run-once, as without --batch.
func TestBatchEvents(t *testing.T) {
	lu := strconv.FormatInt(now+lease, 10)
	lines := func(ids ...string) []string {
		out := []string{`{"event":"claiming","owner":"A"}`}
		for _, id := range ids {
			out = append(out, `{"event":"claimed","id":"`+id+`","qty":7,"token":1,"attempt":1,"lease_until":`+lu+`}`)
		}
		for _, id := range ids {
			out = append(out, `{"event":"response","id":"`+id+`","token":1,"status":200,"ack":true}`)
		}
		for _, id := range ids {
			out = append(out, `{"event":"finished","id":"`+id+`","token":1,"class":"ok","applied":true,"state":"done","reason":null}`)
		}
		return out
	}
	empty := []string{`{"event":"claiming","owner":"A"}`, `{"event":"empty"}`}
	for _, tc := range []struct {
		name     string
		verb     string
		jobs     []string
		wantCode int
		want     []string
	}{
		{"run-once delivers one batch", "run-once", []string{"o-1", "o-2", "o-3"}, 0, lines("o-1", "o-2")},
		{"run delivers batch after batch", "run", []string{"o-1", "o-2", "o-3"}, 0,
			slices.Concat(lines("o-1", "o-2"), lines("o-3"), empty)},
		{"run-once on an empty queue", "run-once", nil, 13, empty},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db, q := newQueue(t, tc.jobs...)
			srv := newReceiver(t, 200, `{"ack":true}`)
			stdout, stderr, code := runSender(t, senderArgs(tc.verb, db, srv.URL, "A", "--batch", "2")...)
			if code != tc.wantCode || stderr != "" {
				t.Fatalf("exit code = %d, stderr %q; want %d and nothing", code, stderr, tc.wantCode)
			}
			if got, want := stdout, strings.Join(tc.want, "\n")+"\n"; got != want {
				t.Errorf("stdout =\n%s\nwant\n%s", got, want)
			}
			if len(tc.jobs) > 0 && getJob(t, q, "o-2").State != queue.Done {
				t.Errorf("o-2 is %s, want done", getJob(t, q, "o-2").State)
			}
		})
	}
}
