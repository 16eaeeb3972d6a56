package labsteps

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Check is one judgement a step made: what was looked at, what the contract
// expects, what the implementation did, and why it matters.
type Check struct {
	What     string        `json:"what"`
	Expected string        `json:"expected"`
	Observed string        `json:"observed"`
	Why      string        `json:"why"`
	OK       bool          `json:"ok"`
	At       time.Duration `json:"at_ns"`
}

// Event is one point on a step's timeline: a process start or exit, a line a
// process printed, or an action of the harness.
type Event struct {
	At      time.Duration `json:"at_ns"`   // real time since the step started
	Lane    string        `json:"lane"`    // A, B, receiver, queuectl, harness
	Kind    string        `json:"kind"`    // start, exit, kill, line, action, check
	Text    string        `json:"text"`    // one readable line
	Clock   int64         `json:"clock"`   // the injected clock (ms) this event ran under; -1 when none
	Section string        `json:"section"` // the variant of the step it belongs to
	Bad     bool          `json:"bad"`     // an exit, kill or refusal worth highlighting
}

// noClock marks an event that did not run under the injected clock.
const noClock = -1

// Lanes of the timeline.
const (
	LaneHarness  = "harness"
	LaneQueuectl = "queuectl"
	LaneReceiver = "receiver"
)

// stepFailed is the panic that ends a step at its first failed check.
type stepFailed struct{}

// Harness owns the world of one step: its directory, the executables under
// test, the processes it started and everything they printed.
type Harness struct {
	ctx    context.Context
	Dir    string // fresh work directory of this step
	LogDir string // per-process logs: NN-name.stdout / .stderr
	Bin    string // directory holding queuectl, sender, receiver
	DB     string // the queue file queuectl verbs use (Dir/queue.db unless changed)
	began  time.Time

	// WaitLimit bounds every single wait for a line, an exit or a state.
	WaitLimit time.Duration

	closing atomic.Bool  // the step is over: cleanup's kills stay off the timeline
	commits atomic.Int64 // commits the step's processes made (counted from what they printed)
	waited  time.Duration

	parent *Harness // set for a part run by Parallel

	mu      sync.Mutex
	events  []Event
	checks  []Check
	narr    bytes.Buffer
	procs   []*Proc
	logs    []procLog
	undo    []func() // run by cleanup
	nproc   int
	section string
}

func newHarness(ctx context.Context, dir, bin string) *Harness {
	return &Harness{ctx: ctx, Dir: dir, LogDir: filepath.Join(dir, "logs"), Bin: bin,
		DB: filepath.Join(dir, "queue.db"), began: time.Now(), WaitLimit: 10 * time.Second}
}

// top is the step's own harness, above any parts.
func (h *Harness) top() *Harness {
	for h.parent != nil {
		h = h.parent
	}
	return h
}

// Part is one independent variant of a step, for Parallel.
type Part struct {
	Name string
	Run  func(h *Harness)
}

// Parallel runs independent parts of a step at once, each in its own section
// with its own files, processes and story, and then merges their checks,
// timelines and stories in the order given, so the report reads as if they
// had run one after the other. A failed check in any part fails the step.
func (h *Harness) Parallel(parts ...Part) {
	subs := make([]*Harness, len(parts))
	panics := make([]any, len(parts))
	var wg sync.WaitGroup
	for i, p := range parts {
		sub := &Harness{ctx: h.ctx, Dir: h.Dir, LogDir: h.LogDir, Bin: h.Bin, DB: h.DB,
			began: h.began, WaitLimit: h.WaitLimit, parent: h}
		subs[i] = sub
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer sub.cleanup()
			defer func() { panics[i] = recover() }()
			sub.Section(p.Name)
			p.Run(sub)
		}()
	}
	wg.Wait()
	h.mu.Lock()
	for _, sub := range subs {
		sub.mu.Lock()
		h.checks = append(h.checks, sub.checks...)
		h.events = append(h.events, sub.events...)
		h.narr.Write(sub.narr.Bytes())
		h.logs = append(h.logs, sub.logs...)
		h.waited += sub.waited
		sub.mu.Unlock()
		h.commits.Add(sub.commits.Load())
	}
	h.mu.Unlock()
	for _, p := range panics {
		if p == nil {
			continue
		}
		if _, ok := p.(stepFailed); !ok {
			panic(p)
		}
	}
	for _, p := range panics {
		if p != nil {
			panic(p)
		}
	}
}

// since is the real time elapsed in the step.
func (h *Harness) since() time.Duration { return time.Since(h.began) }

// Section starts a named variant of the step (for example "a: exit 73"); the
// timeline groups events by it.
func (h *Harness) Section(name string) {
	h.mu.Lock()
	h.section = name
	h.mu.Unlock()
	h.Narrate("── %s", name)
}

// Narrate adds a line to the step's story.
func (h *Harness) Narrate(format string, args ...any) {
	h.mu.Lock()
	defer h.mu.Unlock()
	fmt.Fprintf(&h.narr, "[%7.1fms] %s\n", ms(h.since()), fmt.Sprintf(format, args...))
}

// Event records a point on the timeline.
func (h *Harness) Event(lane, kind, text string, clock int64, bad bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.events = append(h.events, Event{At: h.since(), Lane: lane, Kind: kind, Text: text,
		Clock: clock, Section: h.section, Bad: bad})
}

// Action records something the harness itself did, on the timeline and in the story.
func (h *Harness) Action(text string, clock int64) {
	h.Event(LaneHarness, "action", text, clock, false)
	h.Narrate("harness: %s", text)
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// ---- checks ----

// Check records a judgement and ends the step if it failed.
func (h *Harness) Check(what string, ok bool, expected, observed, why string) {
	c := Check{What: what, Expected: expected, Observed: observed, Why: why, OK: ok, At: h.since()}
	h.mu.Lock()
	h.checks = append(h.checks, c)
	h.mu.Unlock()
	if ok {
		h.Narrate("✓ %s: %s", what, observed)
		return
	}
	h.Narrate("✗ %s\n      expected: %s\n      observed: %s\n      why: %s", what, expected, observed, why)
	h.Event(LaneHarness, "check", "✗ "+what, noClock, true)
	panic(stepFailed{})
}

// Equal checks that got is want, comparing their printed forms (so 7 and
// int64(7) are equal, and a nil pointer prints as null).
func (h *Harness) Equal(what string, want, got any, why string) {
	w, g := show(want), show(got)
	h.Check(what, w == g, w, g, why)
}

// Fatalf ends the step with a failure that is not a comparison, such as a
// process that could not start.
func (h *Harness) Fatalf(what, expected, why, format string, args ...any) {
	h.Check(what, false, expected, fmt.Sprintf(format, args...), why)
}

// show prints a value the way a check message shows it.
func show(v any) string {
	if v == nil {
		return "null"
	}
	rv := reflect.ValueOf(v)
	if rv.Kind() == reflect.Pointer {
		if rv.IsNil() {
			return "null"
		}
		return show(rv.Elem().Interface())
	}
	switch x := v.(type) {
	case string:
		return x
	case json.RawMessage:
		return string(x)
	case fmt.Stringer:
		return x.String()
	}
	return fmt.Sprint(v)
}

// ---- one-shot processes ----

// Run is a process that ran to its end.
type Run struct {
	Prog   string
	Args   []string
	Code   int    // exit code; -1 when ended by a signal or never started
	Signal string // the signal that ended it, if any
	Stdout string
	Stderr string
	Logs   string // log path without the .stdout/.stderr suffix
	Took   time.Duration
}

// Cmdline is the command as a person would type it.
func (r *Run) Cmdline() string { return cmdline(r.Prog, r.Args) }

// Exit says how the process ended, for messages.
func (r *Run) Exit() string { return exitText(r.Code, r.Signal) }

func exitText(code int, sig string) string {
	if sig != "" {
		return "killed by " + sig
	}
	return "exit " + strconv.Itoa(code)
}

func cmdline(prog string, args []string) string {
	var b strings.Builder
	b.WriteString(prog)
	for _, a := range args {
		b.WriteByte(' ')
		if a == "" || strings.ContainsAny(a, " \t\"'\\$`") {
			b.WriteString(strconv.Quote(a))
		} else {
			b.WriteString(a)
		}
	}
	return b.String()
}

// keepLog registers a process's output, written to LogDir only when the step
// fails or the run keeps its work dirs: a passing step's logs would be
// deleted unread, and creating hundreds of files is most of a run's kernel time.
func (h *Harness) keepLog(base string, output func() (stdout, stderr []byte)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.logs = append(h.logs, procLog{base, output})
}

type procLog struct {
	base   string
	output func() (stdout, stderr []byte)
}

// writeLogs writes every process's stdout and stderr, and the story, into the work dir.
func (h *Harness) writeLogs() error {
	if err := os.MkdirAll(h.LogDir, 0o755); err != nil {
		return err
	}
	h.mu.Lock()
	logs := append([]procLog(nil), h.logs...)
	h.mu.Unlock()
	var errs []error
	for _, l := range logs {
		out, errb := l.output()
		errs = append(errs, os.WriteFile(l.base+".stdout", out, 0o644), os.WriteFile(l.base+".stderr", errb, 0o644))
	}
	return errors.Join(errs...)
}

func (h *Harness) logName(what string) string {
	r := h.top()
	r.mu.Lock()
	r.nproc++
	n := r.nproc
	r.mu.Unlock()
	return filepath.Join(h.LogDir, fmt.Sprintf("%02d-%s", n, what))
}

// exec runs bin/prog with args in the work dir and waits for it.
func (h *Harness) exec(prog string, args ...string) *Run {
	r := h.execRaw(prog, args...)
	h.checkTime(r)
	return r
}

// checkTime fails the step if its time ran out while r ran.
func (h *Harness) checkTime(r *Run) {
	if h.ctx.Err() != nil {
		h.Fatalf("the step finishes within its time limit", "done before the limit", "a step that hangs would hang every grading run",
			"time limit reached while running %s", r.Cmdline())
	}
}

// execAll runs several commands at once (they must not depend on each other)
// and returns their runs in order.
func (h *Harness) execAll(cmds [][]string) []*Run {
	runs := make([]*Run, len(cmds))
	var wg sync.WaitGroup
	for i, c := range cmds {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runs[i] = h.execRaw(c[0], c[1:]...)
		}()
	}
	wg.Wait()
	for _, r := range runs {
		h.checkTime(r)
	}
	return runs
}

// execRaw runs a process and records it, but judges nothing: safe to call
// from several goroutines.
func (h *Harness) execRaw(prog string, args ...string) *Run {
	what := prog
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		what += "-" + args[0]
	}
	r := &Run{Prog: prog, Args: args, Code: -1, Logs: h.logName(what)}
	cmd := exec.CommandContext(h.ctx, filepath.Join(h.Bin, prog), args...)
	cmd.Dir = h.Dir
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.WaitDelay = time.Second
	t0 := time.Now()
	err := cmd.Run()
	r.Took = time.Since(t0)
	r.Stdout, r.Stderr = out.String(), errb.String()
	if cmd.ProcessState != nil {
		r.Code, r.Signal = exitStatus(cmd.ProcessState)
	} else if err != nil {
		r.Stderr += "lab: could not start: " + err.Error() + "\n"
	}
	h.keepLog(r.Logs, func() ([]byte, []byte) { return out.Bytes(), errb.Bytes() })
	h.Narrate("$ %s → %s (%.1fms)%s", r.Cmdline(), r.Exit(), ms(r.Took), indent(r.Stdout, r.Stderr))
	if prog == "queuectl" && len(args) > 0 && writeVerbs[args[0]] && (r.Code == 0 || r.Code == 13) {
		h.commits.Add(1)
	}
	return r
}

// writeVerbs are the queuectl verbs that commit a transaction.
var writeVerbs = map[string]bool{"init": true, "enqueue": true, "claim": true, "finish": true, "redrive": true, "investigate": true}

// indent shows a process's output under its command line in the story.
func indent(stdout, stderr string) string {
	var b strings.Builder
	for _, l := range strings.Split(strings.TrimRight(stdout, "\n"), "\n") {
		if l != "" {
			b.WriteString("\n      " + l)
		}
	}
	for _, l := range strings.Split(strings.TrimRight(stderr, "\n"), "\n") {
		if l != "" {
			b.WriteString("\n      stderr: " + l)
		}
	}
	return b.String()
}

// signalName is "SIGKILL" for 9, the way people write it.
func signalName(sig syscall.Signal) string {
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

func exitStatus(ps *os.ProcessState) (code int, sig string) {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return -1, signalName(ws.Signal())
	}
	return ps.ExitCode(), ""
}

// ---- long-running processes ----

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
	Clock int64 // the injected clock it runs under, or noClock
	Pid   int
	cmd   *exec.Cmd

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
	stderr bytes.Buffer // written by os/exec until the process ends
}

// start launches bin/prog in the background.
func (h *Harness) start(name, lane, prog string, clock int64, describe func(Line) (string, bool), args ...string) *Proc {
	p := &Proc{h: h, Name: name, Lane: lane, Prog: prog, Args: args, Clock: clock, describe: describe,
		Logs: h.logName(strings.TrimSuffix(prog+"-"+name, "-"+prog)), notify: make(chan struct{}), done: make(chan struct{}), code: -1}
	// Not CommandContext: the harness ends its processes itself (Kill, or
	// cleanup at the end of the step), so that it knows who killed whom.
	p.cmd = exec.Command(filepath.Join(h.Bin, prog), args...)
	p.cmd.Dir = h.Dir
	// Its own process group, so that a kill reaches whatever it forked too: a
	// child left holding stdout would otherwise keep the harness waiting for
	// an end of file that never comes.
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		h.Fatalf("start "+name, "the process starts", "nothing can be checked without it", "%v", err)
	}
	p.cmd.Stderr = &p.stderr
	if err := p.cmd.Start(); err != nil {
		h.Fatalf("start "+name, "the process starts", "nothing can be checked without it", "%s: %v", cmdline(prog, args), err)
	}
	h.keepLog(p.Logs, func() ([]byte, []byte) {
		p.waitDone(5 * time.Second)
		var out bytes.Buffer
		for _, l := range p.Lines() {
			out.WriteString(l.Text + "\n")
		}
		return out.Bytes(), p.stderr.Bytes()
	})
	p.Pid = p.cmd.Process.Pid
	h.mu.Lock()
	h.procs = append(h.procs, p)
	h.mu.Unlock()
	h.Event(lane, "start", "start "+name, clock, false)
	h.Narrate("$ %s &  (%s, pid %d)", cmdline(prog, args), name, p.Pid)
	go p.read(stdout)
	return p
}

func (p *Proc) read(stdout io.Reader) {
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		text := sc.Text()
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
		p.h.Narrate("%s: %s", p.Name, text)
		p.mu.Lock()
		p.lines = append(p.lines, l)
		close(p.notify)
		p.notify = make(chan struct{})
		p.mu.Unlock()
	}
	io.Copy(io.Discard, stdout)
	err := p.cmd.Wait()
	code, sig := -1, ""
	if p.cmd.ProcessState != nil {
		code, sig = exitStatus(p.cmd.ProcessState)
	} else if err != nil {
		sig = err.Error()
	}
	p.mu.Lock()
	p.exited, p.code, p.signal = true, code, sig
	killed := p.killed
	close(p.notify)
	p.notify = make(chan struct{})
	p.mu.Unlock()
	text := exitText(code, sig)
	if killed && sig != "" {
		text = "killed (SIGKILL)"
	}
	// Exits worth a red cross: a crash, a kill, a refusal. 13 (nothing
	// claimable) and 12 (finish not applied) are answers, not accidents.
	bad := sig != "" || (code != 0 && code != 12 && code != 13)
	if !p.h.closing.Load() {
		p.h.Event(p.Lane, "exit", text, p.Clock, bad)
	}
	p.h.Narrate("%s: %s", p.Name, exitText(code, sig))
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

// wait blocks until cond holds (evaluated under the lock on every change),
// the process exits, or the wait limit passes. It reports whether cond held.
func (p *Proc) wait(cond func() bool) bool {
	timer := time.NewTimer(p.h.WaitLimit)
	defer timer.Stop()
	for {
		p.mu.Lock()
		ok, exited, ch := cond(), p.exited, p.notify
		p.mu.Unlock()
		if ok {
			return true
		}
		if exited {
			return false
		}
		select {
		case <-ch:
		case <-timer.C:
			return false
		case <-p.h.ctx.Done():
			return false
		}
	}
}

// WaitLine waits for a line matching match and returns it; if none comes, the
// step fails with what the process printed and how it ended.
func (p *Proc) WaitLine(what string, match func(Line) bool, why string) Line {
	var found Line
	ok := p.wait(func() bool {
		for _, l := range p.lines {
			if match(l) {
				found = l
				return true
			}
		}
		return false
	})
	if !ok {
		p.h.Check(what, false, "a line that shows it", p.observed(), why)
	}
	return found
}

// WaitEvent waits for the JSON line {"event": kind} (CONTRACT §4).
func (p *Proc) WaitEvent(kind, why string) Line {
	return p.WaitLine(fmt.Sprintf("%s prints {\"event\":%q}", p.Name, kind),
		func(l Line) bool { return l.Str("event") == kind }, why)
}

// observed summarises the process for a failure message.
func (p *Proc) observed() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var b strings.Builder
	if len(p.lines) == 0 {
		b.WriteString("no output")
	} else {
		b.WriteString("printed: ")
		for i, l := range p.lines {
			if i > 0 {
				b.WriteString(" | ")
			}
			b.WriteString(l.Text)
		}
	}
	if p.exited {
		b.WriteString("; then " + exitText(p.code, p.signal))
	} else {
		b.WriteString("; still running after " + p.h.WaitLimit.String())
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
			return trim(l)
		}
	}
	return ""
}

// Wait waits for the process to end and returns its exit code and signal.
func (p *Proc) Wait(why string) (code int, signal string) {
	if !p.wait(func() bool { return p.exited }) {
		p.h.Check(p.Name+" exits", false, "the process ends", p.observed(), why)
	}
	_, code, signal = p.Exited()
	return code, signal
}

// Kill sends SIGKILL, the crash no program can catch, and waits for the end.
func (p *Proc) Kill() {
	p.mu.Lock()
	p.killed = true
	exited := p.exited
	p.mu.Unlock()
	if !exited {
		p.h.Event(LaneHarness, "kill", "SIGKILL "+p.Name, p.Clock, true)
		p.h.Narrate("harness: kill -9 %s (pid %d)", p.Name, p.Pid)
		p.cmd.Process.Signal(syscall.SIGKILL)
	}
	p.killGroup()
	p.waitDone(5 * time.Second)
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

// onCleanup registers f to run when the step (or part) ends.
func (h *Harness) onCleanup(f func()) {
	h.mu.Lock()
	h.undo = append(h.undo, f)
	h.mu.Unlock()
}

// cleanup ends every process the step left running.
func (h *Harness) cleanup() {
	h.closing.Store(true)
	defer func() {
		h.mu.Lock()
		undo := h.undo
		h.undo = nil
		h.mu.Unlock()
		for _, f := range undo {
			f()
		}
	}()
	h.mu.Lock()
	procs := append([]*Proc(nil), h.procs...)
	h.mu.Unlock()
	for _, p := range procs {
		if ex, _, _ := p.Exited(); !ex {
			p.cmd.Process.Signal(syscall.SIGKILL)
		}
		p.killGroup()
	}
	for _, p := range procs {
		p.waitDone(5 * time.Second)
	}
}

// ---- JSON helpers ----

// decodeObject parses exactly one JSON value from s into v.
func decodeObject(s string, v any) error {
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("more than one JSON value")
	}
	return nil
}
