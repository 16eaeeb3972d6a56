package main_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"snacklab/internal/testbin"
)

// bin is the receiver binary, built once for every test in TestMain.
func bin() string { return testbin.Path("receiver") }

func TestMain(m *testing.M) {
	testbin.Main(m, "receiver")
}

// deadline bounds every wait on the child; nothing here sleeps.
const deadline = 20 * time.Second

var listening = regexp.MustCompile(`^listening on (127\.0\.0\.1:[0-9]+)$`)

// proc is one running receiver whose stdout is read line by line.
type proc struct {
	cmd    *exec.Cmd
	url    string
	lines  chan string // closed at stdout EOF
	stderr bytes.Buffer
}

// startProc starts the binary and waits for its "listening on" line.
func startProc(t *testing.T, args ...string) *proc {
	t.Helper()
	p := &proc{cmd: exec.Command(bin(), args...), lines: make(chan string, 256)}
	p.cmd.Stderr = &p.stderr
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(p.lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
	}()
	t.Cleanup(func() {
		if p.cmd.ProcessState == nil {
			p.cmd.Process.Kill()
			for range p.lines {
			}
			p.cmd.Wait()
		}
	})
	line := p.line(t)
	m := listening.FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("first stdout line=%q, want %q", line, "listening on 127.0.0.1:PORT")
	}
	p.url = "http://" + m[1]
	return p
}

// line returns the next stdout line.
func (p *proc) line(t *testing.T) string {
	t.Helper()
	select {
	case line, ok := <-p.lines:
		if !ok {
			t.Fatalf("stdout closed; stderr: %s", p.stderr.String())
		}
		return line
	case <-time.After(deadline):
		t.Fatalf("no stdout line within %v", deadline)
		return ""
	}
}

// stop sends SIGTERM and returns the exit code and any stdout lines left.
func (p *proc) stop(t *testing.T) (int, []string) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	var rest []string
	timeout := time.After(deadline)
	for {
		select {
		case line, ok := <-p.lines:
			if ok {
				rest = append(rest, line)
				continue
			}
			p.cmd.Wait() // stdout is drained, so Wait may close it
			return p.cmd.ProcessState.ExitCode(), rest
		case <-timeout:
			t.Fatalf("receiver still running %v after SIGTERM", deadline)
		}
	}
}

func (p *proc) do(t *testing.T, method, path, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, p.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, strings.TrimSuffix(string(b), "\n")
}

// logged parses one request log line, ignoring its clock reading.
func logged(t *testing.T, line string) string {
	t.Helper()
	var l struct {
		Event  string `json:"event"`
		ID     string `json:"id"`
		Qty    int64  `json:"qty"`
		Token  int64  `json:"token"`
		Result string `json:"result"`
		Status int    `json:"status"`
		AtMS   *int64 `json:"at_ms"`
	}
	if err := json.Unmarshal([]byte(line), &l); err != nil || l.AtMS == nil || *l.AtMS <= 0 {
		t.Fatalf("log line %q: want a request event with at_ms (err %v)", line, err)
	}
	return fmt.Sprintf("%s %s %d %d %s %d", l.Event, l.ID, l.Qty, l.Token, l.Result, l.Status)
}

// TestProcess runs the real binary: post, log, graceful stop, and state
// that outlives the process.
func TestProcess(t *testing.T) {
	db := filepath.Join(t.TempDir(), "receiver.db")
	p := startProc(t, "--db", db)
	steps := []struct {
		body, want, log string
		status          int
	}{
		{`{"id":"o-1","qty":7,"token":1}`, `{"ack":true,"duplicate":false,"stock":7}`, "request o-1 7 1 applied 200", 200},
		{`{"id":"o-1","qty":7,"token":2}`, `{"ack":true,"duplicate":true,"stock":7}`, "request o-1 7 2 duplicate 200", 200},
		{`{"id":"o-1","qty":3,"token":2}`, `{"ack":false,"error":"order o-1 already recorded with qty 7, not 3"}`, "request o-1 3 2 conflict 409", 409},
	}
	for i, s := range steps {
		status, got := p.do(t, http.MethodPost, "/orders", s.body)
		if status != s.status || got != s.want {
			t.Fatalf("step %d: %d %s, want %d %s", i, status, got, s.status, s.want)
		}
		if got, want := logged(t, p.line(t)), s.log; got != want {
			t.Fatalf("step %d: log=%q, want %q", i, got, want)
		}
	}
	code, rest := p.stop(t)
	if got, want := code, 0; got != want {
		t.Fatalf("exit=%d, want %d; stderr %s", got, want, p.stderr.String())
	}
	if len(rest) != 0 || p.stderr.Len() != 0 {
		t.Fatalf("after SIGTERM: stdout %q, stderr %q, want neither", rest, p.stderr.String())
	}

	p = startProc(t, "--db", db)
	if _, got := p.do(t, http.MethodGet, "/stock", ""); got != `{"stock":7,"orders":1,"requests":{"o-1":3}}` {
		t.Fatalf("stock after restart=%s", got)
	}
	if code, _ := p.stop(t); code != 0 {
		t.Fatalf("second exit=%d, want 0", code)
	}
}

// TestProcessFaultFlags checks that the fault flags are in force from the
// first request.
func TestProcessFaultFlags(t *testing.T) {
	p := startProc(t, "--db", filepath.Join(t.TempDir(), "r.db"),
		"--fail-next", "1", "--reject-id", "bad-1", "--reject-id", "bad-2", "--loose-ack", "ok")
	steps := []struct {
		body, want string
		status     int
	}{
		{`{"id":"o-1","qty":7,"token":1}`, `{"ack":false,"error":"fail_next fault: try again"}`, 503},
		{`{"id":"bad-2","qty":7,"token":1}`, `{"ack":false,"error":"order bad-2 rejected by reject_ids fault"}`, 422},
		{`{"id":"o-1","qty":7,"token":2}`, `{"ack":"ok","duplicate":false,"stock":7}`, 200},
	}
	for i, s := range steps {
		if status, got := p.do(t, http.MethodPost, "/orders", s.body); status != s.status || got != s.want {
			t.Fatalf("step %d: %d %s, want %d %s", i, status, got, s.status, s.want)
		}
	}
	if code, _ := p.stop(t); code != 0 {
		t.Fatalf("exit=%d, want 0", code)
	}
}

// TestProcessHoldThenSIGTERM checks that a held response does not block a
// graceful stop, and that its order was committed.
func TestProcessHoldThenSIGTERM(t *testing.T) {
	db := filepath.Join(t.TempDir(), "r.db")
	p := startProc(t, "--db", db, "--hold-next", "1")
	errc := make(chan error, 1)
	go func() {
		resp, err := http.Post(p.url+"/orders", "application/json", strings.NewReader(`{"id":"o-1","qty":7,"token":1}`))
		if err == nil {
			resp.Body.Close()
			err = fmt.Errorf("held request answered %d", resp.StatusCode)
		}
		errc <- err
	}()
	if got, want := logged(t, p.line(t)), "request o-1 7 1 held 0"; got != want {
		t.Fatalf("log=%q, want %q", got, want)
	}
	if _, got := p.do(t, http.MethodGet, "/stock", ""); got != `{"stock":7,"orders":1,"requests":{"o-1":1}}` {
		t.Fatalf("stock while held=%s", got)
	}
	if code, _ := p.stop(t); code != 0 {
		t.Fatalf("exit=%d, want 0; stderr %s", code, p.stderr.String())
	}
	if err := <-errc; err == nil || strings.Contains(err.Error(), "answered") {
		t.Fatalf("held request=%v, want a dropped connection", err)
	}
}

// TestProcessRefuses checks the exit codes of CONTRACT §6, the one-line
// error, and that a refused start writes nothing.
func TestProcessRefuses(t *testing.T) {
	dir := t.TempDir()
	garbage := filepath.Join(dir, "garbage.db")
	garbageBytes := bytes.Repeat([]byte("these are snacks, not pages\n"), 100)
	if err := os.WriteFile(garbage, garbageBytes, 0o644); err != nil {
		t.Fatal(err)
	}

	locked := filepath.Join(dir, "locked.db")
	p := startProc(t, "--db", locked)
	if code, _ := p.stop(t); code != 0 {
		t.Fatalf("creating %s: exit %d", locked, code)
	}
	testbin.HoldExclusive(t, locked)

	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()

	fresh := filepath.Join(dir, "fresh.db") // must never be created
	tests := []struct {
		name   string
		args   []string
		code   int
		stderr string
	}{
		{"unknown flag", []string{"--db", fresh, "--bogus"}, 2, "flag provided but not defined"},
		{"missing db", nil, 2, "missing required flag --db"},
		{"extra argument", []string{"--db", fresh, "serve"}, 2, `unexpected argument "serve"`},
		{"malformed number", []string{"--db", fresh, "--fail-next", "two"}, 2, "-fail-next"},
		{"negative fail-next", []string{"--db", fresh, "--fail-next", "-1"}, 3, "--fail-next -1"},
		{"bad loose-ack", []string{"--db", fresh, "--loose-ack", "yes"}, 3, "loose_ack must be"},
		{"bad reject-id", []string{"--db", fresh, "--reject-id", "a b"}, 3, "not a valid order id"},
		// §6.codes: an invalid value is the first row, before a missing directory.
		{"bad loose-ack, missing dir", []string{"--db", filepath.Join(dir, "nodir", "r.db"), "--loose-ack", "yes"}, 3, "loose_ack must be"},
		{"bad reject-id, missing dir", []string{"--db", filepath.Join(dir, "nodir", "r.db"), "--reject-id", "-x"}, 3, "not a valid order id"},
		{"missing dir", []string{"--db", filepath.Join(dir, "nodir", "r.db")}, 4, "directory"},
		{"zero busy timeout", []string{"--db", fresh, "--busy-timeout-ms", "0"}, 3, "--busy-timeout-ms"},
		{"busy timeout over a day", []string{"--db", fresh, "--busy-timeout-ms", "86400001"}, 3, "--busy-timeout-ms"},
		{"not sqlite", []string{"--db", garbage}, 5, "not a receiver database"},
		{"busy", []string{"--db", locked, "--busy-timeout-ms", "50"}, 6, "database busy"},
		{"address in use", []string{"--db", filepath.Join(dir, "addr.db"), "--addr", taken.Addr().String()}, 1, "listen"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), deadline)
			defer cancel()
			cmd := exec.CommandContext(ctx, bin(), tt.args...)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			cmd.Run()
			if got, want := cmd.ProcessState.ExitCode(), tt.code; got != want {
				t.Fatalf("exit=%d, want %d; stderr %q", got, want, stderr.String())
			}
			msg := stderr.String()
			if !strings.HasPrefix(msg, "receiver: ") || strings.Count(msg, "\n") != 1 ||
				!strings.HasSuffix(msg, "\n") || !strings.Contains(msg, tt.stderr) {
				t.Fatalf("stderr=%q, want one line \"receiver: …%s…\"", msg, tt.stderr)
			}
			if stdout.Len() != 0 {
				t.Fatalf("stdout=%q, want nothing", stdout.String())
			}
			if _, err := os.Stat(fresh); !os.IsNotExist(err) {
				t.Fatalf("%s was created by a refused start (stat err %v)", fresh, err)
			}
			if got, err := os.ReadFile(garbage); err != nil || !bytes.Equal(got, garbageBytes) {
				t.Fatalf("garbage file changed (err %v)", err)
			}
		})
	}
}
