package harness

import (
	"bytes"
	"fmt"
	"sort"
	"strings"
)

// Call is one queuectl invocation for Calls: a verb, its clock (-1 for none)
// and its flags.
type Call struct {
	Verb string
	Now  int64
	Args []string
}

// CallsInTurn runs queuectl invocations one after the other and returns their
// runs. Writers go in turn: the contract asks only claim to be one immediate
// transaction, so two enqueues at once may meet a lock a correct program is
// allowed to give up on, and that is not what these checks are about.
func (h *Harness) CallsInTurn(calls []Call) []*Run {
	runs := make([]*Run, len(calls))
	for i, c := range calls {
		runs[i] = h.Queuectl(c.Verb, c.Now, c.Args...)
	}
	return runs
}

// Calls runs independent queuectl invocations at once and returns their runs
// in order. Use it only where the order between them cannot matter, and for
// commands that write nothing or only claim (see CallsInTurn).
func (h *Harness) Calls(calls []Call) []*Run {
	cmds := make([][]string, len(calls))
	for i, c := range calls {
		cmds[i] = append([]string{"queuectl"}, h.QueuectlArgs(c.Verb, c.Now, c.Args...)...)
	}
	return h.ExecAll(cmds)
}

// Refusal is one invocation the contract refuses, and the exit code it must
// give (CONTRACT §6).
type Refusal struct {
	What string // what is refused, for the check: "qty 0"
	Call
	Code int
	Why  string
}

// FileState is the queue file's content, for telling whether a command wrote.
// The header's change counters (bytes 24–27 and 92–99) are left out: they
// count commits, not content, and some drivers bump them on an empty commit.
type FileState struct {
	path string
	b    []byte
}

// Snapshot reads the queue file now.
func (h *Harness) Snapshot() FileState {
	b, err := ReadNoFollow(h.DB)
	if err != nil {
		h.Fatalf("the harness reads the queue file", "the file is readable", "the step compares it before and after refused commands", "%v", err)
	}
	for _, r := range [][2]int{{24, 28}, {92, 100}} {
		if len(b) >= r[1] {
			clear(b[r[0]:r[1]])
		}
	}
	return FileState{path: h.DB, b: b}
}

// ExpectRefused runs refusals at once (they must not depend on each other),
// then checks each one's exit code, that it printed nothing on stdout, and
// that together they left the queue file byte for byte as it was. known is
// the step's latest view of its jobs (may be nil), to say which one changed if
// the file did.
func (h *Harness) ExpectRefused(rs []Refusal, known map[string]Shown) {
	h.expectRefused(rs, known, h.Calls)
}

// ExpectRefusedInTurn is ExpectRefused for refusals that must look at a job
// first (a conflict, a redrive of a job in the wrong state): they run one after
// the other, so that none of them waits on another's lock on a busy machine.
func (h *Harness) ExpectRefusedInTurn(rs []Refusal, known map[string]Shown) {
	h.expectRefused(rs, known, h.CallsInTurn)
}

func (h *Harness) expectRefused(rs []Refusal, known map[string]Shown, run func([]Call) []*Run) {
	before := h.Snapshot()
	calls := make([]Call, len(rs))
	for i, r := range rs {
		calls[i] = r.Call
	}
	runs := run(calls)
	for i, r := range rs {
		h.ExpectExit(fmt.Sprintf("`queuectl %s` with %s is refused", r.Verb, r.What), r.Code, runs[i], r.Why)
		h.Check(fmt.Sprintf("…and prints nothing on stdout (%s)", r.What), runs[i].Stdout == "",
			"empty stdout: the error is one line on stderr (CONTRACT §3)", fmt.Sprintf("stdout %q", Trim(runs[i].Stdout)),
			"a program reading stdout must never mistake an error for an answer")
	}
	h.ExpectUnchanged(before, known, "refused commands write nothing (CONTRACT §6: no program writes anything when it exits 2–11)",
		describeCalls(calls))
}

// ExpectNoWrite runs calls that must change nothing (duplicates) in turn,
// returns their runs, and checks the queue file is as it was (known as for
// ExpectRefused).
func (h *Harness) ExpectNoWrite(why string, calls []Call, known map[string]Shown) []*Run {
	before := h.Snapshot()
	runs := h.CallsInTurn(calls)
	h.ExpectUnchanged(before, known, why, describeCalls(calls))
	return runs
}

func describeCalls(calls []Call) string {
	var b strings.Builder
	for i, c := range calls {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(c.Verb + " " + strings.Join(c.Args, " "))
	}
	return b.String()
}

// ExpectUnchanged compares the queue file with before and, if it changed,
// says which of jobs changed and how.
func (h *Harness) ExpectUnchanged(before FileState, jobs map[string]Shown, why, ran string) {
	after := h.Snapshot()
	if bytes.Equal(before.b, after.b) {
		h.Check("the queue file is unchanged, byte for byte", true, "", "unchanged", why)
		return
	}
	ids := make([]string, 0, len(jobs))
	for id := range jobs {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	var diffs []string
	if len(ids) > 0 {
		now := h.ShowAll(ids...)
		for _, id := range ids {
			b, a := jobs[id], now[id]
			if b.Job.Canon != a.Job.Canon || len(b.Redrives) != len(a.Redrives) || len(b.Investigations) != len(a.Investigations) {
				diffs = append(diffs, fmt.Sprintf("%s was %s (redrives %d, investigations %d) and is now %s (redrives %d, investigations %d)",
					id, b.Job.Canon, len(b.Redrives), len(b.Investigations), a.Job.Canon, len(a.Redrives), len(a.Investigations)))
			}
		}
	}
	obs := "the file's content changed"
	if len(diffs) > 0 {
		obs += ": " + strings.Join(diffs, "; ")
	} else if len(ids) > 0 {
		obs += " (no job's fields did: a row was added somewhere, such as an audit row or a new job)"
	}
	h.Check("the queue file is unchanged, byte for byte", false, "the same content after: "+ran, obs, why)
}
