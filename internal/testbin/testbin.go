// Package testbin is the one set-up that tests over snacklab's real
// binaries share: build the programs once per test binary, run them as a
// user would (exit code, stdout, stderr), and hold a queue file's write lock
// from another process. It exists so that cmd/*'s tests and the hostile-input
// table do not each carry a copy.
package testbin

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	_ "modernc.org/sqlite"
)

// holdLockEnv makes Main act as the lock-holding child of HoldLock.
const holdLockEnv = "SNACKLAB_TESTBIN_HOLD_LOCK"

var dir string // where Main built the binaries

// Main is a whole TestMain: it builds each named command of snacklab/cmd
// into a temporary directory, runs the tests and removes the directory. Run
// as HoldLock's child it holds the lock instead and never runs a test.
func Main(m *testing.M, cmds ...string) {
	if path := os.Getenv(holdLockEnv); path != "" {
		holdLock(path)
		return
	}
	var err error
	dir, err = os.MkdirTemp("", "snacklab-testbin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	for _, c := range cmds {
		build := exec.Command("go", "build", "-o", filepath.Join(dir, c), "snacklab/cmd/"+c)
		if out, err := build.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "build %s: %v\n%s", c, err, out)
			os.RemoveAll(dir)
			os.Exit(1)
		}
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// Path is the built binary of cmd, e.g. Path("queuectl").
func Path(cmd string) string { return filepath.Join(dir, cmd) }

// Result is what one run of a binary did.
type Result struct {
	Code           int
	Stdout, Stderr string
}

// Run runs the built cmd with args to its end, bounded by a minute.
func Run(t testing.TB, cmd string, args ...string) Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := exec.CommandContext(ctx, Path(cmd), args...)
	var stdout, stderr bytes.Buffer
	c.Stdout, c.Stderr = &stdout, &stderr
	err := c.Run()
	var ee *exec.ExitError
	code := 0
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("run %s %v: %v", cmd, args, err)
	}
	return Result{code, stdout.String(), stderr.String()}
}

// HoldLock holds an immediate transaction on the SQLite file at path from
// another process (this test binary, re-run through Main) until the test
// ends. sqlite3 is not on every machine, and a lock held by the test's own
// process would not show how another process waits.
func HoldLock(t testing.TB, path string) {
	t.Helper()
	holder := exec.Command(os.Args[0])
	holder.Env = append(os.Environ(), holdLockEnv+"="+path)
	stdin, err := holder.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := holder.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stdin.Close(); holder.Wait() })
	buf := make([]byte, 64)
	n, _ := io.ReadAtLeast(stdout, buf, 1) // blocks until the holder says it holds the lock
	if !strings.Contains(string(buf[:n]), "locked") {
		t.Fatalf("lock holder said %q, want \"locked\"", buf[:n])
	}
}

// holdLock is HoldLock's child: BEGIN IMMEDIATE until stdin closes.
func holdLock(path string) {
	db, err := sql.Open("sqlite", path)
	if err != nil {
		panic(err)
	}
	conn, err := db.Conn(context.Background())
	if err != nil {
		panic(err)
	}
	if _, err := conn.ExecContext(context.Background(), "BEGIN IMMEDIATE"); err != nil {
		panic(err)
	}
	fmt.Println("locked")
	io.ReadAll(os.Stdin)
	conn.ExecContext(context.Background(), "ROLLBACK")
}

// HoldExclusive holds an exclusive lock on the SQLite file at path, from a
// connection of this process, until the test ends: no other connection may
// read or write the file meanwhile. It is for an open that must find the
// file busy; HoldLock is for a writer that must wait on another process.
func HoldExclusive(t testing.TB, path string) {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := db.Conn(context.Background())
	if err != nil {
		db.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn.ExecContext(context.Background(), "ROLLBACK")
		conn.Close()
		db.Close()
	})
	if _, err := conn.ExecContext(context.Background(), "BEGIN EXCLUSIVE"); err != nil {
		t.Fatalf("hold an exclusive lock on %s: %v", path, err)
	}
}
