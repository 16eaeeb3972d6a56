// Package systrace runs a program under strace and reads back the system
// calls it made, so the lab can judge what a process did to its files and
// sockets rather than how long it idled: whether an acceptance reached stdout
// only after its commit reached the disk, whether a process "waiting for the
// lock" really tried the lock, and, with fault injection, what every crash
// point leaves behind (ALICE, CrashMonkey).
//
// It is black-box: any implementation of the contract, in any language, makes
// system calls. Tracing needs ptrace; Available says whether this machine (or
// container) allows it.
package systrace

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Options say what to record and what to inject.
type Options struct {
	// Out is the trace file (strace -o). Required.
	Out string
	// Trace lists the system calls or strace classes to record
	// ("fsync", "%desc", "%file"); empty records every call.
	Trace []string
	// Inject lists fault injections in strace's syntax, e.g.
	// "fsync,fdatasync:signal=KILL:when=3" kills the process as it enters
	// its third fsync or fdatasync (the call itself never runs).
	Inject []string
	// StringLimit is how many bytes of each string argument are printed
	// (strace -s); 0 means 32.
	StringLimit int
	// Timestamps records when each call began (strace -ttt, microseconds)
	// in Call.Time, so a wait can be measured from what the process did
	// (its first refused lock attempt) rather than from when a poller saw it.
	Timestamps bool
	// User is the account strace runs the program as (strace -u): strace
	// itself stays the caller's, so the trace stays out of the program's
	// reach. Empty: the program runs as strace does.
	User string
}

// Args is the whole strace command line that runs name with args under opts:
// ["strace", "-f", …, "--", name, args…].
func Args(opts Options, name string, args ...string) []string {
	s := opts.StringLimit
	if s <= 0 {
		s = 32
	}
	// -f follows every thread and child; -y prints the file behind each
	// descriptor; -q drops attach messages but keeps the "+++ exited with
	// 0 +++" and "+++ killed by SIGKILL +++" lines Parse reads.
	argv := []string{stracePath(), "-f", "-q", "-y", "-s", strconv.Itoa(s), "-o", opts.Out}
	if opts.Timestamps {
		argv = append(argv, "-ttt")
	}
	if len(opts.Trace) > 0 {
		argv = append(argv, "-e", "trace="+strings.Join(opts.Trace, ","))
		// Untraced calls then cost nothing, but seccomp filtering and fault
		// injection do not mix in strace 6.1: only without injection.
		if len(opts.Inject) == 0 {
			argv = append(argv, "--seccomp-bpf")
		}
	}
	for _, in := range opts.Inject {
		argv = append(argv, "--inject="+in)
	}
	if opts.User != "" {
		argv = append(argv, "-u", opts.User)
	}
	argv = append(argv, "-e", "signal=none", "--", name)
	return append(argv, args...)
}

// Command is exec.CommandContext for Args. strace exits the way the traced
// program did (with its code, or killed by the same signal).
func Command(ctx context.Context, opts Options, name string, args ...string) *exec.Cmd {
	argv := Args(opts, name, args...)
	return exec.CommandContext(ctx, argv[0], argv[1:]...)
}

// stracePath is strace found on PATH, else at its usual place (a container
// may run the lab with no PATH at all), else just "strace".
func stracePath() string {
	if p, err := exec.LookPath("strace"); err == nil {
		return p
	}
	for _, p := range []string{"/usr/bin/strace", "/bin/strace", "/usr/local/bin/strace"} {
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
			return p
		}
	}
	return "strace"
}

var (
	availOnce sync.Once
	availErr  error
)

// Available reports nil when strace is installed and may trace a child here
// (ptrace can be forbidden, e.g. in a container without CAP_SYS_PTRACE).
func Available() error {
	availOnce.Do(func() {
		path, err := exec.LookPath(stracePath())
		if err != nil {
			availErr = fmt.Errorf("strace not found: install the Debian package strace: %w", err)
			return
		}
		f, err := os.CreateTemp("", "systrace-probe-*")
		if err != nil {
			availErr = err
			return
		}
		f.Close()
		defer os.Remove(f.Name())
		// The traced program is strace itself (-V): it is there even in an
		// image with nothing else (FROM scratch), where "true" is not.
		argv := Args(Options{Out: f.Name(), Trace: []string{"exit_group"}}, path, "-V")
		if out, err := exec.Command(path, argv[1:]...).CombinedOutput(); err != nil {
			availErr = fmt.Errorf("strace cannot trace here (ptrace not allowed?): %v: %s", err, strings.TrimSpace(string(out)))
		}
	})
	return availErr
}

// Call is one system call of the trace.
type Call struct {
	Seq  int    // position in Trace.Calls: the order strace saw the calls start
	PID  int    // the thread (task) that made it
	Name string // "write", "fsync", …
	Args string // the argument text between the parentheses, as strace printed it
	// FD is the first argument when strace printed it as a descriptor with
	// its file (-y), else -1; Path is that file: a path, "pipe:[123]",
	// "socket:[456]", "TCP:[…]".
	FD   int
	Path string
	// Ret is the return value (-1 on error); Errno names the error
	// ("EAGAIN"), "" on success. Unfinished calls have neither.
	Ret   int64
	Errno string
	// Unfinished means the call never returned: the process died in it,
	// for instance killed by an injected signal as the call began, or, in
	// a trace read while the process runs, it has not returned yet.
	Unfinished bool
	// Time is when the call began, with Options.Timestamps; zero otherwise.
	Time time.Time
}

// Trace is what one traced run did.
type Trace struct {
	Calls []Call
	// Killed maps a thread to the signal that ended it ("SIGKILL"). strace
	// often dies with its last tracee before writing that thread's line:
	// an Unfinished last call and the Command's exit status are what
	// reliably say "killed here".
	Killed map[int]string
	// Exited maps a thread to its exit code.
	Exited map[int]int
}

// ParseFile reads a trace file written by a Command.
func ParseFile(path string) (*Trace, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return Parse(f)
}

// ParseSoFar reads a trace file that strace may still be writing: only its
// complete lines, so it can be polled while the traced process runs (strace
// writes each line as the call returns, or as "<unfinished ...>" when another
// thread's call comes first).
func ParseSoFar(path string) (*Trace, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
		b = b[:i+1]
	} else {
		b = nil
	}
	return Parse(bytes.NewReader(b))
}

// Parse reads strace -f -o output: one line per call, "PID name(args) = ret",
// with calls interrupted by another thread split into "<unfinished ...>" and
// "<... name resumed>" halves, which Parse joins at the place the call began.
func Parse(r io.Reader) (*Trace, error) {
	t := &Trace{Killed: map[int]string{}, Exited: map[int]int{}}
	open := map[int]int{} // pid → index of its unfinished call
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		pidText, rest, ok := strings.Cut(line, " ")
		pid, err := strconv.Atoi(pidText)
		if !ok || err != nil {
			return nil, fmt.Errorf("trace line %d: no pid: %q", n, line)
		}
		rest = strings.TrimLeft(rest, " ")
		var at time.Time
		if stamp, tail, ok := strings.Cut(rest, " "); ok && isStamp(stamp) {
			at, rest = parseStamp(stamp), strings.TrimLeft(tail, " ")
		}
		switch {
		case strings.HasPrefix(rest, "+++ killed by "):
			sig := strings.TrimSuffix(strings.TrimPrefix(rest, "+++ killed by "), " +++")
			sig, _, _ = strings.Cut(sig, " ") // "SIGKILL (core dumped)"
			t.Killed[pid] = sig
			continue
		case strings.HasPrefix(rest, "+++ exited with "):
			code, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(rest, "+++ exited with "), " +++"))
			t.Exited[pid] = code
			continue
		case strings.HasPrefix(rest, "---"): // a signal
			continue
		case strings.HasPrefix(rest, "+++ superseded by execve"):
			// A thread other than the leader called execve (the judged-exec
			// step of a traced start, harness.Judged, is a Go program): the
			// leader's pid goes on as the new program.
			continue
		case strings.HasPrefix(rest, "<... "):
			i, ok := open[pid]
			if !ok {
				continue // resumed a call that began before tracing started
			}
			delete(open, pid)
			_, tail, _ := strings.Cut(rest, " resumed>")
			args, ret := splitRet(tail)
			c := &t.Calls[i]
			c.Args += args
			c.Unfinished = false
			setRet(c, ret)
			fillFD(c)
			continue
		}
		paren := strings.IndexByte(rest, '(')
		if paren <= 0 {
			return nil, fmt.Errorf("trace line %d: not a call: %q", n, line)
		}
		c := Call{Seq: len(t.Calls), PID: pid, Name: rest[:paren], FD: -1, Time: at}
		body := rest[paren+1:]
		if head, ok := strings.CutSuffix(body, " <unfinished ...>"); ok {
			c.Args, c.Unfinished = head, true
			open[pid] = len(t.Calls)
		} else {
			args, ret := splitRet(body)
			c.Args = args
			setRet(&c, ret)
		}
		fillFD(&c)
		t.Calls = append(t.Calls, c)
	}
	return t, sc.Err()
}

// isStamp reports whether s is a -ttt timestamp: "1700000000.123456".
func isStamp(s string) bool {
	sec, frac, ok := strings.Cut(s, ".")
	if !ok || sec == "" || frac == "" {
		return false
	}
	for _, r := range sec + frac {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// parseStamp reads a -ttt timestamp (seconds, a dot, up to 9 digits).
func parseStamp(s string) time.Time {
	sec, frac, _ := strings.Cut(s, ".")
	n, _ := strconv.ParseInt(sec, 10, 64)
	frac = (frac + "000000000")[:9]
	ns, _ := strconv.ParseInt(frac, 10, 64)
	return time.Unix(n, ns)
}

// splitRet splits "args)   = ret" at the last ") = " (strace pads the
// space before "=" to a column).
func splitRet(s string) (args, ret string) {
	i := strings.LastIndex(s, " = ")
	if i < 0 {
		return strings.TrimSuffix(s, ")"), "?"
	}
	head := strings.TrimRight(s[:i], " ")
	return strings.TrimSuffix(head, ")"), strings.TrimSpace(s[i+3:])
}

// setRet reads "3</path>", "0", "-1 EAGAIN (Resource…)", "0x8001 (flags …)" or "?".
func setRet(c *Call, ret string) {
	if ret == "?" || ret == "" {
		c.Unfinished = true
		return
	}
	f := strings.Fields(ret)
	num := f[0]
	if i := strings.IndexByte(num, '<'); i >= 0 {
		num = num[:i]
	}
	v, err := strconv.ParseInt(num, 0, 64)
	if err != nil {
		c.Unfinished = true
		return
	}
	c.Ret = v
	if v == -1 && len(f) > 1 {
		c.Errno = f[1]
	}
}

// fillFD reads a leading "N<path>" argument.
func fillFD(c *Call) {
	a := c.Args
	lt := strings.IndexByte(a, '<')
	if lt <= 0 {
		return
	}
	fd, err := strconv.Atoi(a[:lt])
	if err != nil {
		return
	}
	// The path runs to the '>' that closes it; paths with '>' in them are
	// printed escaped by strace, so the first '>' is the end.
	gt := strings.IndexByte(a[lt:], '>')
	if gt < 0 {
		return
	}
	c.FD, c.Path = fd, a[lt+1:lt+gt]
}

// ErrNoCalls is returned by helpers that need at least one matching call.
var ErrNoCalls = errors.New("no matching system call in the trace")

// Filter lists the calls for which keep is true, in trace order.
func (t *Trace) Filter(keep func(Call) bool) []Call {
	var out []Call
	for _, c := range t.Calls {
		if keep(c) {
			out = append(out, c)
		}
	}
	return out
}

// Last is the last call for which keep is true.
func (t *Trace) Last(keep func(Call) bool) (Call, error) {
	for i := len(t.Calls) - 1; i >= 0; i-- {
		if keep(t.Calls[i]) {
			return t.Calls[i], nil
		}
	}
	return Call{}, ErrNoCalls
}

// SignalName is "SIGKILL" for 9, the way people write it, for the signals a
// lab or a crash run meets; "signal N" for the others.
func SignalName(sig syscall.Signal) string {
	switch sig {
	case syscall.SIGKILL:
		return "SIGKILL"
	case syscall.SIGTERM:
		return "SIGTERM"
	case syscall.SIGINT:
		return "SIGINT"
	case syscall.SIGABRT:
		return "SIGABRT"
	case syscall.SIGSEGV:
		return "SIGSEGV"
	case syscall.SIGQUIT:
		return "SIGQUIT"
	}
	return "signal " + strconv.Itoa(int(sig))
}
