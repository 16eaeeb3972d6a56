package labsteps

import (
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"snacklab/internal/systrace"
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
	db        string // the queue file as strace names it (-y: symlinks resolved)
}

// The system calls each kind of check records. Tracing only these lets
// strace filter in the kernel (--seccomp-bpf), so every other call runs at
// full speed.
var (
	// lockCalls: the lock attempts (SQLite's unix VFS takes fcntl locks;
	// flock for its unix-flock VFS) and the exit, timed.
	lockCalls = []string{"fcntl", "flock", "exit_group"}
	// durableCalls: lockCalls and every write, sync and delete that makes a
	// rollback-journal commit, and the writes to stdout.
	durableCalls = []string{"fcntl", "flock", "exit_group", "write", "writev", "pwrite64", "pwritev", "pwritev2",
		"fsync", "fdatasync", "unlink", "unlinkat"}
)

// requireStrace fails the step when strace cannot trace here: the checks
// that need it would otherwise pass without having looked.
func (h *Harness) requireStrace(what string) {
	if err := systrace.Available(); err != nil {
		h.Fatalf(what, "strace installed and allowed to trace (the Debian package strace; ptrace permitted)",
			"this check judges the system calls a process made; without strace it cannot be made, and a check that is not made must not pass",
			"%v", err)
	}
}

// startTraced is start under strace, recording calls (with timestamps).
func (h *Harness) startTraced(name, lane, prog string, clock int64, describe func(Line) (string, bool), calls []string, args ...string) *Traced {
	h.requireStrace("start " + name + " under strace")
	p := h.newProc(name, lane, prog, clock, describe, args)
	t := &Traced{Proc: p, TraceFile: filepath.Join(h.Dir, filepath.Base(p.Logs)+".trace"), db: h.kernelPath(h.DB)}
	argv := systrace.Args(systrace.Options{Out: t.TraceFile, Trace: calls, Timestamps: true, StringLimit: 48},
		filepath.Join(h.Bin, prog), args...)
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
	if c.Path != t.db {
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
// process ends or WaitLimit passes first.
func (t *Traced) WaitRefused(what, why string) systrace.Call {
	tr, ok := t.WaitTrace(func(tr *systrace.Trace) bool {
		_, ok := t.firstRefused(tr)
		return ok
	})
	c, _ := t.firstRefused(tr)
	if !ok {
		t.h.Check(what, false,
			"a refused attempt to take the write lock on "+filepath.Base(t.db)+" (fcntl F_SETLK F_WRLCK → EAGAIN), then waiting",
			t.lockStory(tr), why)
	}
	t.h.Action(fmt.Sprintf("%s tried the write lock and was refused (trace: %s)", t.Name, callText(c)), noClock)
	return c
}

// lockStory says what a process did instead of waiting for the lock.
func (t *Traced) lockStory(tr *systrace.Trace) string {
	n := 0
	for _, c := range tr.Calls {
		if c.Path == t.db && (c.Name == "flock" || strings.Contains(c.Args, "F_SETLK") || strings.Contains(c.Args, "F_OFD_SETLK")) {
			n++
		}
	}
	ex, code, sig := t.Exited()
	state := "still running after " + t.h.WaitLimit.String() + " without a refused write-lock attempt"
	if ex {
		state = "ended (" + exitText(code, sig) + ") without a refused write-lock attempt"
	}
	return fmt.Sprintf("%s; %d lock calls on %s in its trace %s; %s", state, n, filepath.Base(t.db), t.TraceFile, t.observed())
}

// callText is one call as a message shows it.
func callText(c systrace.Call) string {
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

// writeCall reports whether c writes data to a file descriptor.
func writeCall(c systrace.Call) bool {
	switch c.Name {
	case "write", "writev", "pwrite64", "pwritev", "pwritev2":
		return true
	}
	return false
}

// stdoutWrites lists the writes to the process's stdout (fd 1, or any
// descriptor on the same pipe) that wrote something or have not returned.
func stdoutWrites(tr *systrace.Trace) []systrace.Call {
	pipe := ""
	for _, c := range tr.Calls {
		if c.FD == 1 && c.Path != "" {
			pipe = c.Path
			break
		}
	}
	return tr.Filter(func(c systrace.Call) bool {
		return writeCall(c) && (c.FD == 1 || pipe != "" && c.Path == pipe) && (c.Ret > 0 || c.Unfinished)
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
	return fmt.Sprintf("%d bytes (FNV-1a %016x), -journal %s", len(b), sum.Sum64(), presence(jerr))
}
