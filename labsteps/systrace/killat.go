package systrace

import (
	"errors"
	"os"
	"strings"
	"syscall"
)

// strace counts an injection's when=N per thread, not per process: a Go
// program whose goroutine moves to another OS thread between its claim and
// its finish (measured: a sender's claim and finish ran on different threads
// in 2 runs of 3) never has its finish's first calls hit, and which call a
// given N hits depends on the scheduler. Crash-point enumeration must be
// deterministic, so KillAt counts matching calls across every thread and
// child of the process itself, with ptrace, and kills at the N-th.

// Site is one system call that KillAt saw begin: a candidate crash point.
type Site struct {
	Index int    // 1-based position among the calls Match accepted
	TID   int    // the thread that made it
	Name  string // "fsync", "pwrite64", "unlink", …
	// Path is the file the call works on: the descriptor's target
	// ("/w/q.db", "socket:[123]", "pipe:[9]") or the path argument of
	// unlink/rename. FD is the descriptor, -1 for path calls.
	Path string
	FD   int
}

// KillOptions configure one KillAt run.
type KillOptions struct {
	Dir    string
	Env    []string // nil: this process's environment
	Stdin  *os.File // nil: /dev/null
	Stdout *os.File // nil: /dev/null
	Stderr *os.File // nil: /dev/null
	// Match says whether a call counts as a crash point. Only the calls
	// named in Watched are looked at.
	Match func(s Site) bool
	// N kills the process (its whole process group, with SIGKILL) as it
	// enters the N-th matching call, which therefore never runs; 0 never
	// kills and only records.
	N int
}

// Watched are the system calls KillAt decodes: the writes, syncs, sends
// and renames that decide what a crash leaves on disk and on the wire.
var Watched = []string{"write", "pwrite64", "writev", "pwritev", "pwritev2", "fsync", "fdatasync",
	"sync_file_range", "sendto", "sendmsg", "unlink", "unlinkat", "rename", "renameat", "renameat2",
	"ftruncate", "truncate"}

// Killed is what a KillAt run did.
type Killed struct {
	Sites []Site // every watched call, in the order they began (Index 0 when Match refused it)
	Hit   *Site  // the call it was killed at, nil when it ran to its end
	// Code is the exit code, -1 when killed by a signal (Signal names it).
	Code   int
	Signal string
}

// Trace turns the recorded calls into a Trace, so the judgements over a
// strace trace (Durable) also apply to a KillAt run. Return values are
// not recorded: every call but the hit one counts as completed.
func (k *Killed) Trace() *Trace {
	t := &Trace{Killed: map[int]string{}, Exited: map[int]int{}}
	for i, s := range k.Sites {
		c := Call{Seq: i, PID: s.TID, Name: s.Name, FD: s.FD, Path: s.Path}
		if k.Hit != nil && i == len(k.Sites)-1 {
			c.Unfinished = true
		}
		t.Calls = append(t.Calls, c)
	}
	return t
}

// ErrNoPtrace means this platform has no KillAt.
var ErrNoPtrace = errors.New("killat: ptrace-based crash points need linux/amd64")

// Process is a program running under KillAt.
type Process struct {
	Pid  int
	done chan struct{}
	res  Killed
	err  error
}

// Wait waits for the process (every thread and child) to end.
func (p *Process) Wait() (Killed, error) {
	<-p.done
	return p.res, p.err
}

// Done is closed once the process has ended.
func (p *Process) Done() <-chan struct{} { return p.done }

// Signal sends sig to the process group.
func (p *Process) Signal(sig syscall.Signal) error {
	return syscall.Kill(-p.Pid, sig)
}

// KillAt starts argv under ptrace and returns once it runs.
func KillAt(argv []string, opts KillOptions) (*Process, error) {
	return killAt(argv, opts)
}

func devNull(f *os.File) (*os.File, func(), error) {
	if f != nil {
		return f, func() {}, nil
	}
	n, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		return nil, nil, err
	}
	return n, func() { n.Close() }, nil
}

// readString reads a NUL-terminated string of a tracee at addr, word by
// word (peek), at most 4096 bytes.
func readString(peek func(addr uintptr, out []byte) (int, error), addr uintptr) string {
	var b strings.Builder
	buf := make([]byte, 8)
	for b.Len() < 4096 {
		n, err := peek(addr, buf)
		if err != nil || n == 0 {
			break
		}
		for _, c := range buf[:n] {
			if c == 0 {
				return b.String()
			}
			b.WriteByte(c)
		}
		addr += uintptr(n)
	}
	return b.String()
}
