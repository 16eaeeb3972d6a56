package harness

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	_ "modernc.org/sqlite" // the lab's own hand on the programs' SQLite files
)

// JudgedSQLCommand is the lab's hidden subcommand that becomes a judged
// identity and then runs SQL statements on one connection to a file:
// lab judged-sql UID GID DSN, one JSON request a line on stdin, one JSON
// answer a line on stdout.
const JudgedSQLCommand = "judged-sql"

// SQLHand is the lab's hand on an SQLite file of the programs under test:
// one connection on which the harness runs statements in turn, a lock held
// from BEGIN to ROLLBACK included. With a judged identity the connection
// lives in a helper process that has become the judged (`lab judged-sql`),
// so the file, its journal and whatever a program planted at their names (a
// symlink to one of the lab's own files) are opened with the judged's rights,
// never the lab's. Without one (the lab and the programs are one user) it is
// a connection of the lab's own.
type SQLHand struct {
	db   *sql.DB
	conn *sql.Conn

	cmd    *exec.Cmd
	in     io.WriteCloser
	out    *bufio.Reader
	stderr *capBuffer // read only once the helper was waited for
	waited bool
}

// SQLiteDSN opens the file at path read-write, never creating it, with a
// busy timeout of busyMs.
func SQLiteDSN(path string, busyMs int) string {
	abs, _ := filepath.Abs(path)
	return "file:" + (&url.URL{Path: abs}).EscapedPath() + "?mode=rw&_busy_timeout=" + strconv.Itoa(busyMs)
}

// openSQL opens a hand on dsn as the step's judged when there is one.
func (h *Harness) openSQL(ctx context.Context, dsn string) (*SQLHand, error) {
	return h.Judged.OpenSQL(ctx, dsn)
}

// OpenSQL opens a hand on dsn as j (nil: as the lab).
func (j *Judged) OpenSQL(ctx context.Context, dsn string) (*SQLHand, error) {
	if j == nil || len(j.Exec) == 0 {
		db, err := sql.Open("sqlite", dsn)
		if err != nil {
			return nil, err
		}
		conn, err := db.Conn(ctx)
		if err != nil {
			db.Close()
			return nil, err
		}
		return &SQLHand{db: db, conn: conn}, nil
	}
	cmd := exec.Command(j.Exec[0], JudgedSQLCommand, strconv.FormatUint(uint64(j.UID), 10), strconv.FormatUint(uint64(j.GID), 10), dsn)
	cmd.Env = j.Env()
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stderr := newCapBuffer(64 << 10)
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", JudgedSQLCommand, err)
	}
	s := &SQLHand{cmd: cmd, in: in, out: bufio.NewReader(out), stderr: stderr}
	if _, err := s.answer(ctx); err != nil { // its first line: the connection is open
		s.Close()
		return nil, err
	}
	return s, nil
}

// Exec runs stmt (one or more statements) on the hand's connection.
func (s *SQLHand) Exec(ctx context.Context, stmt string) error {
	_, err := s.do(ctx, sqlRequest{SQL: stmt})
	return err
}

// Value runs a query and returns its first row's first column as text (an
// integrity check's "ok").
func (s *SQLHand) Value(ctx context.Context, query string) (string, error) {
	return s.do(ctx, sqlRequest{SQL: query, Value: true})
}

// sqlRequest is one line to the helper; sqlAnswer its answer.
type sqlRequest struct {
	SQL   string `json:"sql"`
	Value bool   `json:"value,omitempty"`
}

type sqlAnswer struct {
	Error *string `json:"error,omitempty"`
	Value string  `json:"value,omitempty"`
}

// run is what a request does on a connection, in either process.
func (r sqlRequest) run(ctx context.Context, conn *sql.Conn) (string, error) {
	if r.Value {
		var v sql.NullString
		err := conn.QueryRowContext(ctx, r.SQL).Scan(&v)
		return v.String, err
	}
	_, err := conn.ExecContext(ctx, r.SQL)
	return "", err
}

func (s *SQLHand) do(ctx context.Context, r sqlRequest) (string, error) {
	if s.conn != nil {
		return r.run(ctx, s.conn)
	}
	b, _ := json.Marshal(r)
	if _, err := s.in.Write(append(b, '\n')); err != nil {
		return "", fmt.Errorf("%s: %w", JudgedSQLCommand, err)
	}
	return s.answer(ctx)
}

// answer reads the helper's answer to the last request, giving up (and
// ending the helper) when ctx ends.
func (s *SQLHand) answer(ctx context.Context) (string, error) {
	type reply struct {
		line []byte
		err  error
	}
	got := make(chan reply, 1)
	go func() {
		line, err := s.out.ReadBytes('\n')
		got <- reply{line, err}
	}()
	select {
	case <-ctx.Done():
		syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		<-got
		s.wait()
		return "", ctx.Err()
	case r := <-got:
		if r.err != nil {
			s.wait() // its stderr is whole once it was waited for
			return "", fmt.Errorf("%s ended: %w (stderr: %q)", JudgedSQLCommand, r.err, s.stderr.String())
		}
		var a sqlAnswer
		if err := json.Unmarshal(r.line, &a); err != nil {
			return "", fmt.Errorf("%s: answer %q: %w", JudgedSQLCommand, r.line, err)
		}
		if a.Error != nil {
			return "", errors.New(*a.Error)
		}
		return a.Value, nil
	}
}

// Close ends the connection (an open transaction is rolled back).
func (s *SQLHand) Close() error {
	if s.conn != nil {
		err := s.conn.Close()
		if cerr := s.db.Close(); err == nil {
			err = cerr
		}
		return err
	}
	if s.waited {
		return nil
	}
	return s.wait() // stdin's end ends the helper (rolling back what is open)
}

// wait closes the helper's stdin and waits for it, once, at most
// sqlCloseLimit before killing it: the helper runs as the judged, and a
// judged program may have stopped it.
func (s *SQLHand) wait() error {
	s.waited = true
	s.in.Close()
	// Process.Kill, not kill(2) on the pid: it is a no-op once the helper
	// was waited for, so a reused pid is never signalled.
	t := time.AfterFunc(sqlCloseLimit, func() { s.cmd.Process.Kill() })
	defer t.Stop()
	return s.cmd.Wait()
}

// sqlCloseLimit bounds the end of a helper after its stdin closed.
const sqlCloseLimit = 10 * time.Second

// Helper runs args as one of the lab's hidden subcommands for the judged
// (judged-exec, judged-sql, judged-kill) and reports whether args named one: the lab's
// main, and a test binary that stands in for the lab, call it first.
// judged-exec returns only on failure.
func Helper(args []string, stdin io.Reader, stdout io.Writer) (bool, error) {
	if len(args) == 0 {
		return false, nil
	}
	switch args[0] {
	case JudgedExecCommand:
		return true, JudgedExec(args[1:])
	case JudgedSQLCommand:
		return true, JudgedSQL(args[1:], stdin, stdout)
	case JudgedKillCommand:
		return true, JudgedKill(args[1:])
	}
	return false, nil
}

// JudgedSQL is the judged-sql subcommand: args are UID GID DSN. It drops to
// the judged identity first (every thread: no file is opened before), then
// opens DSN and answers each request read from stdin (sqlRequest, one JSON
// object a line) with one sqlAnswer on stdout: {} or {"value":"…"}, or
// {"error":"…"}; its first answer says whether the file opened. It makes
// itself non-dumpable, so the judged, whose uid it now has, can neither
// trace it nor read its memory.
func JudgedSQL(args []string, stdin io.Reader, stdout io.Writer) error {
	if len(args) != 3 {
		return fmt.Errorf("usage: lab %s UID GID DSN", JudgedSQLCommand)
	}
	if err := become(JudgedSQLCommand, args[0], args[1]); err != nil {
		return err
	}
	// The judged share this uid now: none of their processes may trace this
	// one and answer for it (an integrity check's "ok").
	if err := notDumpable(); err != nil {
		return fmt.Errorf("%s: prctl(PR_SET_DUMPABLE, 0): %w", JudgedSQLCommand, err)
	}
	enc := json.NewEncoder(stdout)
	say := func(v string, err error) error {
		if err != nil {
			e := err.Error()
			return enc.Encode(sqlAnswer{Error: &e})
		}
		return enc.Encode(sqlAnswer{Value: v})
	}
	ctx := context.Background()
	db, err := sql.Open("sqlite", args[2])
	if err != nil {
		return say("", err)
	}
	defer db.Close()
	conn, err := db.Conn(ctx)
	if err != nil {
		return say("", err)
	}
	defer conn.Close()
	if err := say("", nil); err != nil {
		return err
	}
	sc := bufio.NewScanner(stdin)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		var r sqlRequest
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return fmt.Errorf("%s: request %q: %w", JudgedSQLCommand, sc.Bytes(), err)
		}
		if err := say(r.run(ctx, conn)); err != nil {
			return err
		}
	}
	return sc.Err()
}
