package harness

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"snacklab/labsteps/result"
	"snacklab/labsteps/systrace"
)

// Line is one line a background process printed on stdout.
type Line struct {
	At   time.Duration  // when the harness read it, since the step started
	Text string         // the line without its newline
	Obj  map[string]any // the line as a JSON object; nil if it is not one
}

// Str reads a string member of a JSON line ("" when absent or not a string).
func (l Line) Str(key string) string {
	s, _ := l.Obj[key].(string)
	return s
}

// Int reads an integer member of a JSON line (-1 when absent or not a number).
func (l Line) Int(key string) int64 {
	switch x := l.Obj[key].(type) {
	case json.Number:
		if n, err := x.Int64(); err == nil {
			return n
		}
	case float64:
		return int64(x)
	}
	return -1
}

// Raw prints a member of a JSON line as JSON ("absent" when missing).
func (l Line) Raw(key string) string {
	v, ok := l.Obj[key]
	if !ok {
		return "absent"
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// Proc is a process running in the background, its stdout read line by line.
type Proc struct {
	h     *Harness
	Name  string // A, B, receiver…
	Lane  string
	Prog  string
	Args  []string
	Logs  string
	Clock int64 // the injected clock it runs under, or result.NoClock
	Pid   int
	cmd   *exec.Cmd
	// stdoutPipe is the pipe the harness gave it as stdout, as strace -y
	// names it ("pipe:[INODE]"): its output, whichever process writes it.
	stdoutPipe string

	// describe turns a stdout line into timeline text; "" keeps it off the timeline.
	describe func(Line) (text string, bad bool)

	mu     sync.Mutex
	lines  []Line
	notify chan struct{} // closed and replaced whenever lines or the exit change
	exited bool
	code   int
	signal string
	killed bool // the harness sent SIGKILL
	done   chan struct{}
	stderr *capBuffer // written by os/exec until the process ends; MaxStderr
	cut    bool       // stdout went past MaxStdout: the rest was dropped
}

// Start launches bin/prog in the background.
func (h *Harness) Start(name, lane, prog string, clock int64, describe func(Line) (string, bool), args ...string) *Proc {
	p := h.newProc(name, lane, prog, clock, describe, args)
	h.launch(p, append([]string{filepath.Join(h.Bin, prog)}, args...), "")
	return p
}

// newProc is a background process not yet started.
func (h *Harness) newProc(name, lane, prog string, clock int64, describe func(Line) (string, bool), args []string) *Proc {
	return &Proc{h: h, Name: name, Lane: lane, Prog: prog, Args: args, Clock: clock, describe: describe,
		Logs: h.logName(strings.TrimSuffix(prog+"-"+name, "-"+prog)), notify: make(chan struct{}), done: make(chan struct{}), code: -1, stderr: newCapBuffer(MaxStderr)}
}

// launch starts p as argv (the program itself, or a tracer running it) and
// reads its stdout; traced, when not "", names the trace for the story.
func (h *Harness) launch(p *Proc, argv []string, traced string) {
	name := p.Name
	// Not CommandContext: the harness ends its processes itself (Kill, or
	// cleanup at the end of the step), so that it knows who killed whom.
	p.cmd = exec.Command(argv[0], argv[1:]...)
	p.cmd.Dir = h.Dir
	// Its own process group, so that a kill reaches whatever it forked too: a
	// child left holding stdout would otherwise keep the harness waiting for
	// an end of file that never comes.
	// As the judged, when there is one (judged.go); strace stays the
	// judge's, and drops to the judged itself (-u) or through the
	// judged-exec step it runs.
	p.cmd.SysProcAttr = h.Judged.ProcAttr()
	if traced != "" {
		p.cmd.SysProcAttr.Credential = nil
	}
	p.cmd.Env = h.Judged.Env()
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		h.Fatalf("start "+name, "the process starts", "nothing can be checked without it", "%v", err)
	}
	if f, ok := stdout.(*os.File); ok {
		p.stdoutPipe, _ = systrace.PipeName(f) // "" only if fstat fails: StdoutWrites says so
	}
	p.cmd.Stderr = p.stderr
	if err := p.cmd.Start(); err != nil {
		h.Fatalf("start "+name, "the process starts", "nothing can be checked without it", "%s: %v", cmdline(p.Prog, p.Args), err)
	}
	h.keepLog(p.Logs, func() ([]byte, []byte) {
		var out bytes.Buffer
		if !p.waitDone(h.Limits.Drain) {
			// os/exec may still be writing stderr: leave it out.
			for _, l := range p.Lines() {
				out.WriteString(l.Text + "\n")
			}
			return out.Bytes(), []byte(fmt.Sprintf("lab: output still open %v after the step; stderr not collected\n", h.Limits.Drain))
		}
		for _, l := range p.Lines() {
			out.WriteString(l.Text + "\n")
		}
		return out.Bytes(), p.stderr.Bytes()
	})
	p.Pid = p.cmd.Process.Pid
	h.mu.Lock()
	h.procs = append(h.procs, p)
	h.mu.Unlock()
	if traced == "" {
		h.Event(p.Lane, "start", "start "+name, p.Clock, false)
		h.Narrate("$ %s &  (%s, pid %d)", cmdline(p.Prog, p.Args), name, p.Pid)
	} else {
		h.Event(p.Lane, "start", "start "+name+" (traced)", p.Clock, false)
		h.Narrate("$ strace … %s &  (%s, pid %d; trace %s)", cmdline(p.Prog, p.Args), name, p.Pid, traced)
	}
	go p.read(stdout)
}

func (p *Proc) read(stdout io.Reader) {
	lr := newLineReader(stdout, MaxLine, MaxStdout)
	for {
		text, ok := lr.next()
		if !ok {
			break
		}
		l := Line{At: p.h.since(), Text: text}
		dec := json.NewDecoder(strings.NewReader(text))
		dec.UseNumber()
		var obj map[string]any
		if dec.Decode(&obj) == nil && !dec.More() {
			l.Obj = obj
		}
		if l.Obj != nil {
			switch l.Str("event") {
			case "claimed", "empty", "finished", "request": // a claim, a finish, an order at the receiver
				p.h.commits.Add(1)
			}
		}
		if p.describe != nil {
			if t, bad := p.describe(l); t != "" {
				p.h.Event(p.Lane, "line", t, p.Clock, bad)
			}
		}
		p.h.Narrate("%s: %s", p.Name, bound(text, MaxNarrate))
		p.mu.Lock()
		p.lines = append(p.lines, l)
		close(p.notify)
		p.notify = make(chan struct{})
		p.mu.Unlock()
	}
	io.Copy(io.Discard, stdout)
	if lr.cutStream {
		p.h.Narrate("%s: stdout cut at %d bytes (the rest was read and dropped)", p.Name, MaxStdout)
	}
	err := p.cmd.Wait()
	code, sig := -1, ""
	if p.cmd.ProcessState != nil {
		code, sig = exitStatus(p.cmd.ProcessState)
	} else if err != nil {
		sig = err.Error()
	}
	p.mu.Lock()
	p.exited, p.code, p.signal = true, code, sig
	p.cut = lr.cutStream
	killed := p.killed
	close(p.notify)
	p.notify = make(chan struct{})
	p.mu.Unlock()
	text := ExitText(code, sig)
	if killed && sig != "" {
		text = "killed (SIGKILL)"
	}
	// Exits worth a red cross: a crash, a kill, a refusal. 13 (nothing
	// claimable) and 12 (finish not applied) are answers, not accidents.
	bad := sig != "" || (code != 0 && code != 12 && code != 13)
	if !p.h.closing.Load() {
		p.h.Event(p.Lane, "exit", text, p.Clock, bad)
	}
	p.h.Narrate("%s: %s", p.Name, ExitText(code, sig))
	close(p.done)
}

// Lines is what the process has printed so far.
func (p *Proc) Lines() []Line {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Line(nil), p.lines...)
}

// Exited reports whether the process has ended, and how.
func (p *Proc) Exited() (exited bool, code int, signal string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exited, p.code, p.signal
}

// Observed summarises the process for a failure message.
func (p *Proc) Observed() string { return p.observedAfter(p.h.WaitLimit) }

// observedAfter is observed after a wait of waited.
func (p *Proc) observedAfter(waited time.Duration) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var b strings.Builder
	if len(p.lines) == 0 {
		b.WriteString("no output")
	} else {
		var printed strings.Builder
		for i, l := range p.lines {
			if i > 0 {
				printed.WriteString(" | ")
			}
			printed.WriteString(l.Text)
			if printed.Len() > MaxObserved {
				break
			}
		}
		b.WriteString("printed: " + bound(printed.String(), MaxObserved))
	}
	if p.cut {
		b.WriteString(fmt.Sprintf(" (stdout cut at %d bytes)", MaxStdout))
	}
	if p.exited {
		b.WriteString("; then " + ExitText(p.code, p.signal))
	} else {
		b.WriteString("; still running after " + waited.String())
	}
	b.WriteString(p.stderrHint())
	return b.String()
}

// stderrHint points at the process's stderr for a failure message, quoting
// its first line once the process has ended. Call with p.mu held.
func (p *Proc) stderrHint() string {
	// Once exited is set, os/exec has finished writing p.stderr.
	if p.exited {
		if line := firstLine(p.stderr.String()); line != "" {
			return " (stderr: " + line + "; all of it in " + p.Logs + ".stderr)"
		}
	}
	return " (stderr: " + p.Logs + ".stderr)"
}

// StderrHint is stderrHint for callers outside the lock.
func (p *Proc) StderrHint() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stderrHint()
}

// firstLine is the first non-blank line of s, trimmed and bounded.
func firstLine(s string) string {
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			return Trim(l)
		}
	}
	return ""
}

// Kill sends SIGKILL, the crash no program can catch, and waits for the end.
func (p *Proc) Kill() {
	p.mu.Lock()
	p.killed = true
	exited := p.exited
	p.mu.Unlock()
	if !exited {
		p.h.Event(result.LaneHarness, "kill", "SIGKILL "+p.Name, p.Clock, true)
		p.h.Narrate("harness: kill -9 %s (pid %d)", p.Name, p.Pid)
		p.cmd.Process.Signal(syscall.SIGKILL)
	}
	p.killGroup()
	if !p.waitDone(p.h.Limits.Drain) {
		// Its lines are judged next: they must be all of them.
		p.h.Timeout("the output of "+p.Name+" is read to its end after kill -9", "stdout closed, exit recorded",
			fmt.Sprintf("still open %v after the kill (a process it started outside its group holds it, or the machine is very busy)", p.h.Limits.Drain),
			"the lab never judges output that may have been cut")
	}
}

// Terminate sends SIGTERM, the stop a service manager or a container runtime
// asks for, to the process the lab started (a wrapper script must exec the
// program for it to arrive), and does not wait.
func (p *Proc) Terminate() {
	p.h.Action(fmt.Sprintf("SIGTERM %s (pid %d)", p.Name, p.Pid), p.Clock)
	p.cmd.Process.Signal(syscall.SIGTERM)
}

// killGroup kills what the process left behind in its group (it may have
// exited itself while a child it forked still holds its stdout).
func (p *Proc) killGroup() { syscall.Kill(-p.Pid, syscall.SIGKILL) }

// waitDone waits for the process's output to end and its exit to be
// recorded, at most limit: a process that escaped its group must not hang
// the lab.
func (p *Proc) waitDone(limit time.Duration) bool {
	t := time.NewTimer(limit)
	defer t.Stop()
	select {
	case <-p.done:
		return true
	case <-t.C:
		return false
	}
}
