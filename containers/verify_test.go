package containers_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"snacklab/containers"
)

// TestVerifierWithoutDocker runs the image's binaries as host processes on
// loopback, so the verifier's judgements are tested even where there is no
// Docker engine: it must wait for readiness, refuse a half-played scenario
// without writing to the queue, give up on a lease nobody took, and reject
// a bad command line.
func TestVerifierWithoutDocker(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	dir := t.TempDir()
	built := time.Now()
	if err := containers.WriteContext(ctx, dir, containers.ContextOptions{}); err != nil {
		t.Fatalf("laying out the image context (building its binaries): %s", explain(ctx, built, err))
	}
	t.Logf("built the image's binaries in %v", time.Since(built).Round(time.Millisecond))
	bin := func(name string) string { return filepath.Join(dir, "bin", name) }
	db := filepath.Join(t.TempDir(), "queue.db")

	rcvURL := startHostReceiver(ctx, t, bin("receiver"), filepath.Join(t.TempDir(), "receiver.db"))

	run := func(name string, args ...string) (int, string) {
		t.Helper()
		cmd := exec.CommandContext(ctx, bin(name), args...)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		started := time.Now()
		err := cmd.Run()
		var ee *exec.ExitError
		switch {
		case err == nil:
			return 0, out.String()
		case errors.As(err, &ee) && ee.Exited():
			return ee.ExitCode(), out.String()
		}
		t.Fatalf("%s %v: %s\n%s", name, args, explain(ctx, started, err), out.String())
		return 0, ""
	}
	mustRun := func(want int, name string, args ...string) string {
		t.Helper()
		code, out := run(name, args...)
		if code != want {
			t.Fatalf("%s %v: expected exit %d, observed %d\n%s", name, args, want, code, out)
		}
		return out
	}
	qc := "--queuectl=" + bin("queuectl")

	mustRun(0, "verify", "wait-ready", rcvURL+"/stock", "--timeout-ms", "10000")
	mustRun(0, "queuectl", "init", "--db", db, "--json")
	mustRun(0, "queuectl", "enqueue", "--db", db, "--id", "o-1", "--qty", "7", "--json")
	before := mustRun(0, "queuectl", "show", "--db", db, "--id", "o-1", "--json")

	// Nothing was sent: every check about the end state must fail, and the
	// verifier's late finish (refused: the job is not leased) writes nothing.
	out := mustRun(1, "verify", "outcome", "--db", db, "--id", "o-1", "--receiver", rcvURL, qc)
	for _, want := range []string{"FAIL receiver stock", "FAIL job state", "checks failed"} {
		if !strings.Contains(out, want) {
			t.Errorf("verify outcome on a pending job: expected a line with %q, observed\n%s", want, out)
		}
	}
	if after := mustRun(0, "queuectl", "show", "--db", db, "--id", "o-1", "--json"); after != before {
		t.Errorf("verify outcome wrote to the queue:\nbefore %s\nafter  %s", before, after)
	}

	// Nobody claimed or sent it: the gate gives up at its deadline.
	out = mustRun(1, "verify", "wait-reclaimable", "--db", db, "--id", "o-1", "--receiver", rcvURL, "--timeout-ms", "300", qc)
	if !strings.Contains(out, "not reached within") {
		t.Errorf("wait-reclaimable with nothing sent: expected a timeout naming what it waited for, observed\n%s", out)
	}

	for _, args := range [][]string{
		{},
		{"nonsense"},
		{"outcome", "--db", db, "--id", "o-1"}, // --receiver missing
		{"outcome", "--db", db, "--id", "o-1", "--receiver", "ftp://x"},
		{"wait-ready"},
	} {
		if code, out := run("verify", args...); code != 2 {
			t.Errorf("verify %v: expected usage exit 2, observed %d\n%s", args, code, out)
		}
	}
}

// startHostReceiver starts the receiver on a free loopback port and returns
// its URL once it has announced itself; it is stopped by t.Cleanup.
func startHostReceiver(ctx context.Context, t *testing.T, path, db string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	cmd := exec.CommandContext(ctx, path, "--db", db, "--addr", "127.0.0.1:0")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); _ = cmd.Wait() })
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		if sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		_, _ = io.Copy(io.Discard, stdout) // keep the pipe drained
	}()
	started := time.Now()
	select {
	case line, ok := <-lines:
		addr, found := strings.CutPrefix(line, "listening on ")
		if !ok || !found {
			t.Fatalf("receiver's first line: expected `listening on ADDR`, observed %q", line)
		}
		return "http://" + addr
	case <-ctx.Done():
		t.Fatalf("the receiver did not announce `listening on`: %s", explain(ctx, started, ctx.Err()))
	}
	return ""
}
