package harness

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"snacklab/labsteps/systrace"
)

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
	// Cut says its stdout or stderr was still open Limits.Drain after it
	// ended (something it left behind held them): Stdout and Stderr may be
	// incomplete, and exec fails the step as timed out instead of judging them.
	Cut bool
}

// Cmdline is the command as a person would type it.
func (r *Run) Cmdline() string { return cmdline(r.Prog, r.Args) }

// Short is Cmdline with every absolute path cut to its file name: what a
// check's description shows, so it names nothing of the machine and reads
// the same wherever the step's dir was (lab.log keeps the whole line).
func (r *Run) Short() string {
	args := make([]string, len(r.Args))
	for i, a := range r.Args {
		if filepath.IsAbs(a) {
			a = filepath.Base(a)
		}
		args[i] = a
	}
	return cmdline(r.Prog, args)
}

// Exit says how the process ended, for messages.
func (r *Run) Exit() string { return ExitText(r.Code, r.Signal) }

func ExitText(code int, sig string) string {
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

// Exec runs bin/prog with args in the work dir and waits for it.
func (h *Harness) Exec(prog string, args ...string) *Run {
	r := h.execRaw(prog, args...)
	h.checkTime(r)
	return r
}

// checkTime fails the step, as timed out, if its time ran out while r ran or
// r's output could not be read to its end: what r printed cannot be judged.
func (h *Harness) checkTime(r *Run) {
	if h.ctx.Err() != nil {
		h.Timeout("the step finishes within its time limit", "done before the limit",
			"time limit reached while running "+r.Short(), "a step that hangs would hang every grading run")
	}
	if r.Cut {
		h.Timeout("read the whole output of "+r.Short(), "stdout and stderr end when the process ends",
			fmt.Sprintf("%s, but its output was not read to its end %v later (a process it left outside its group holds it, or the machine is very busy); what was read: %s",
				r.Exit(), h.Limits.Drain, Trim(strings.TrimSpace(r.Stdout+" "+r.Stderr))),
			"the lab never judges output that may have been cut")
	}
}

// ExecAll runs several commands at once (they must not depend on each other)
// and returns their runs in order.
func (h *Harness) ExecAll(cmds [][]string) []*Run {
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
	// Its own process group, so that the step's time limit, or output held
	// open after the end, kills whatever it left behind too.
	cmd.SysProcAttr = h.Judged.ProcAttr()
	cmd.Env = h.Judged.Env()
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	o, err := collect(cmd)
	if err != nil {
		r.Stderr = "lab: could not start: " + err.Error() + "\n"
		h.Narrate("$ %s → could not start: %v", r.Cmdline(), err)
		return r
	}
	t0 := time.Now()
	err = cmd.Start()
	o.started()
	if err == nil {
		err = cmd.Wait()
	}
	r.Took = time.Since(t0)
	if cmd.Process != nil {
		// What it left behind in its group goes too: everything the
		// process itself wrote is in the pipes already, and a leftover
		// must not keep them open.
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	r.Cut = !o.drain(h.Limits.Drain)
	out, errb := o.stdout, o.stderr
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

func exitStatus(ps *os.ProcessState) (code int, sig string) {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return -1, systrace.SignalName(ws.Signal())
	}
	return ps.ExitCode(), ""
}
