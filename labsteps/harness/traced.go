package harness

import (
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"snacklab/labsteps/result"
	"snacklab/labsteps/systrace"
)

// Traced is a background process the harness runs under strace, so that a
// step can judge what it did to the queue file (tried the write lock and was
// refused; wrote, synced and deleted the journal before printing) rather than
// how long it idled. It is a Proc in every other way: the same stdout lines,
// exit, Kill and logs; Pid is strace's, and the process it runs is strace's
// child in the same process group.
type Traced struct {
	*Proc
	TraceFile string
	DB        string // the queue file as strace names it (-y: symlinks resolved)
}

// The system calls each kind of check records. Tracing only these lets
// strace filter in the kernel (--seccomp-bpf), so every other call runs at
// full speed.
var (
	// LockCalls: the lock attempts (SQLite's unix VFS takes fcntl locks;
	// flock for its unix-flock VFS) and the exit, timed.
	LockCalls = []string{"fcntl", "flock", "exit_group"}
	// DurableCalls: lockCalls and every write, sync and delete that makes a
	// rollback-journal commit, and the writes to stdout.
	DurableCalls = []string{"fcntl", "flock", "exit_group", "write", "writev", "pwrite64", "pwritev", "pwritev2",
		"fsync", "fdatasync", "unlink", "unlinkat"}
)

// RequireStrace fails the step when strace cannot trace here: the checks
// that need it would otherwise pass without having looked.
func (h *Harness) RequireStrace(what string) {
	if err := systrace.Available(); err != nil {
		h.Fatalf(what, "strace installed and allowed to trace (the Debian package strace; ptrace permitted)",
			"this check judges the system calls a process made; without strace it cannot be made, and a check that is not made must not pass",
			"%v", err)
	}
}

// StartTraced is start under strace, recording calls (with timestamps).
func (h *Harness) StartTraced(name, lane, prog string, clock int64, describe func(Line) (string, bool), calls []string, args ...string) *Traced {
	h.RequireStrace("start " + name + " under strace")
	p := h.newProc(name, lane, prog, clock, describe, args)
	// The trace is evidence: it goes to the judge's log dir, written by
	// strace running as the judge, never into the traced program's reach
	// (a program once appended fsync lines to its own trace).
	if err := os.MkdirAll(h.LogDir, 0o700); err != nil {
		h.Fatalf("start "+name+" under strace", "the lab's log dir", "the trace is written there", "%v", err)
	}
	t := &Traced{Proc: p, TraceFile: filepath.Join(h.LogDir, filepath.Base(p.Logs)+".trace"), DB: h.kernelPath(h.DB)}
	progArgv := []string{filepath.Join(h.Bin, prog)}
	opts := systrace.Options{Out: t.TraceFile, Trace: calls, Timestamps: true, StringLimit: 48, User: h.Judged.straceUser(progArgv[0])}
	if opts.User == "" {
		var err error
		if progArgv, err = h.Judged.TracedArgv(progArgv[0]); err != nil {
			h.Fatalf("start "+name+" under strace", "the program traced as the judged identity", "the trace must stay the judge's", "%v", err)
		}
	}
	argv := systrace.Args(opts, progArgv[0], append(progArgv[1:], args...)...)
	h.launch(p, argv, t.TraceFile)
	return t
}

// kernelPath is path as strace -y prints it: absolute, symlinks resolved.
func (h *Harness) kernelPath(path string) string {
	abs, err := filepath.Abs(path)
	if err != nil {
		return path
	}
	dir, err := filepath.EvalSymlinks(filepath.Dir(abs))
	if err != nil {
		return abs
	}
	return filepath.Join(dir, filepath.Base(abs))
}

// Trace is what strace has written so far.
func (t *Traced) Trace() *systrace.Trace {
	tr, err := systrace.ParseSoFar(t.TraceFile)
	if errors.Is(err, os.ErrNotExist) {
		return &systrace.Trace{} // strace has not opened it yet
	}
	if err != nil {
		t.h.Fatalf("read the trace of "+t.Name, "a trace strace wrote", "the check judges what the process did from it",
			"%s: %v", t.TraceFile, err)
	}
	return tr
}

// A wait re-reads the trace after tracePoll, doubling the interval up to
// tracePollMax: quick when the process is quick, cheap when it is slow to
// start (the whole trace is parsed each time).
const (
	tracePoll    = time.Millisecond
	tracePollMax = 16 * time.Millisecond
)

// WaitTrace polls the trace until cond holds and returns it with true; once
// the process has ended (its trace is then complete), or after WaitLimit,
// it returns the last trace with cond's answer on it.
func (t *Traced) WaitTrace(cond func(*systrace.Trace) bool) (*systrace.Trace, bool) {
	deadline := time.Now().Add(t.h.WaitLimit)
	poll := tracePoll
	timer := time.NewTimer(poll)
	defer timer.Stop()
	for {
		ex, _, _ := t.Exited()
		if ex {
			t.waitDone(t.h.Limits.Drain)
		}
		tr := t.Trace()
		if cond(tr) {
			return tr, true
		}
		if ex || time.Now().After(deadline) {
			return tr, false
		}
		select {
		case <-timer.C:
			poll = min(2*poll, tracePollMax)
			timer.Reset(poll)
		case <-t.done:
		case <-t.h.ctx.Done():
			return tr, false
		}
	}
}

// refusedWriteLock reports whether c is an attempt to take a write lock on
// the queue file that another process's lock refused: fcntl F_SETLK (or the
// OFD variant) with F_WRLCK failing EAGAIN or EACCES, a blocking F_SETLKW
// still waiting, or flock LOCK_EX refused or waiting.
func (t *Traced) refusedWriteLock(c systrace.Call) bool {
	if c.Path != t.DB {
		return false
	}
	switch c.Name {
	case "fcntl", "fcntl64":
		if !strings.Contains(c.Args, "F_WRLCK") {
			return false
		}
		if strings.Contains(c.Args, "SETLKW") {
			return c.Unfinished || c.Errno == "EINTR"
		}
		return strings.Contains(c.Args, "SETLK") && (c.Errno == "EAGAIN" || c.Errno == "EACCES")
	case "flock":
		if !strings.Contains(c.Args, "LOCK_EX") {
			return false
		}
		if strings.Contains(c.Args, "LOCK_NB") {
			return c.Errno == "EWOULDBLOCK" || c.Errno == "EAGAIN"
		}
		return c.Unfinished
	}
	return false
}

// firstRefused is the first refused write-lock attempt in tr.
func (t *Traced) firstRefused(tr *systrace.Trace) (systrace.Call, bool) {
	for _, c := range tr.Calls {
		if t.refusedWriteLock(c) {
			return c, true
		}
	}
	return systrace.Call{}, false
}

// WaitRefused waits until the trace shows the process tried the queue's
// write lock and was refused: it is then really waiting for the lock the
// harness holds, whatever language it is written in and however slowly it
// started. It fails the step, with what the process did instead, when the
// process ends first; when WaitLimit passes first the step ends as TIMEOUT.
func (t *Traced) WaitRefused(what, why string) systrace.Call {
	tr, ok := t.WaitTrace(func(tr *systrace.Trace) bool {
		_, ok := t.firstRefused(tr)
		return ok
	})
	c, _ := t.firstRefused(tr)
	if !ok {
		expected := "a refused attempt to take the write lock on " + filepath.Base(t.DB) + " (fcntl F_SETLK F_WRLCK → EAGAIN), then waiting"
		if ex, _, _ := t.Exited(); !ex {
			// Still running: on a loaded machine it may not have got
			// there (an interpreter's shared lock, its reads, then the
			// write). A wait that ran out, not a wrong answer; a process
			// that ended without trying has answered.
			t.h.Timeout(what, expected, t.lockStory(tr), why)
		}
		t.h.Check(what, false, expected, t.lockStory(tr), why)
	}
	t.h.Action(fmt.Sprintf("%s tried the write lock and was refused (trace: %s)", t.Name, CallText(c)), result.NoClock)
	return c
}

// lockCalls counts the lock calls on the queue file in tr.
func (t *Traced) lockCalls(tr *systrace.Trace) int {
	n := 0
	for _, c := range tr.Calls {
		if c.Path == t.DB && (c.Name == "flock" || strings.Contains(c.Args, "F_SETLK") || strings.Contains(c.Args, "F_OFD_SETLK")) {
			n++
		}
	}
	return n
}

// lockStory says what a process did instead of waiting for the lock.
func (t *Traced) lockStory(tr *systrace.Trace) string {
	n := t.lockCalls(tr)
	ex, code, sig := t.Exited()
	state := "still running after " + t.h.WaitLimit.String() + " without a refused write-lock attempt"
	if ex {
		state = "ended (" + ExitText(code, sig) + ") without a refused write-lock attempt"
	}
	return fmt.Sprintf("%s; %d lock calls on %s in its trace %s; %s", state, n, filepath.Base(t.DB), t.TraceFile, t.Observed())
}

// CallText is one call as a message shows it.
func CallText(c systrace.Call) string {
	s := c.Name + "(" + c.Args + ")"
	if len(s) > 160 {
		s = s[:160] + "…"
	}
	if c.Unfinished {
		return s + " … (not returned)"
	}
	if c.Errno != "" {
		return s + " = -1 " + c.Errno
	}
	return s + " = " + strconv.FormatInt(c.Ret, 10)
}

// StdoutWrites lists the writes to the process's stdout that wrote
// something or have not returned: the writes to the pipe the harness gave it,
// identified by its inode, through any descriptor and by any process of the
// traced tree (a wrapper script, a version manager's shim, an interpreter and
// what they start are the program). A write to descriptor 1 that leads
// elsewhere, such as a shim's command substitution writing to a pipe of its
// own, is not the program's output.
func (t *Traced) StdoutWrites(tr *systrace.Trace) []systrace.Call {
	if t.stdoutPipe == "" {
		t.h.Fatalf("find the stdout pipe of "+t.Name+" in its trace", "the inode of the pipe the harness created",
			"the program's output is told apart from other writes by its pipe", "fstat of the pipe failed")
	}
	toStdout := systrace.ToFile(t.stdoutPipe)
	return tr.Filter(func(c systrace.Call) bool {
		return toStdout(c) && (c.Ret > 0 || c.Unfinished)
	})
}

// exitCall is the last exit_group of the trace: when the process ended.
func exitCall(tr *systrace.Trace) (systrace.Call, bool) {
	c, err := tr.Last(func(c systrace.Call) bool { return c.Name == "exit_group" })
	return c, err == nil
}

// Digest is the queue file's bytes and whether a -journal lies beside it, to
// show that a process that gave up wrote nothing. It reads through the
// descriptor the lock opened: closing any other descriptor of the file in
// this process would drop the harness's fcntl locks on it (POSIX locks
// belong to the process, and the first close of the file releases them all).
func (l *WriteLock) Digest() string {
	fi, err := l.f.Stat()
	if err != nil {
		return "unreadable: " + err.Error()
	}
	b := make([]byte, fi.Size())
	if _, err := l.f.ReadAt(b, 0); err != nil {
		return "unreadable: " + err.Error()
	}
	_, jerr := os.Stat(l.h.DB + "-journal")
	sum := fnv.New64a()
	sum.Write(b)
	return fmt.Sprintf("%d bytes (FNV-1a %016x), -journal %s", len(b), sum.Sum64(), Presence(jerr))
}

// Presence says whether a file was found, from the error of its os.Stat:
// "present", "absent", or the error.
func Presence(err error) string {
	if err == nil {
		return "present"
	}
	if os.IsNotExist(err) {
		return "absent"
	}
	return err.Error()
}
