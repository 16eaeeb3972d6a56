package labsteps

import (
	"fmt"
	"sort"
	"strings"

	"snacklab/labsteps/harness"
	"snacklab/labsteps/result"
)

// racer is one writer of a race: its name and queuectl flags.
type racer struct {
	name string
	verb string
	args []string
}

// raceEnded is how one racer ended: its exit code and its stdout.
type raceEnded struct {
	name, exit string
	code       int
	out        string
}

// raceWriters starts every racer against the write lock the harness holds,
// each with the harness's patience as its busy timeout (waiting is what the
// contract asks of them; how long the machine takes is not judged here: a
// racer that gave up busy, exit 6, after waiting a wait limit for the other
// would be a tolerated §2.busy outcome judged strictly by the race's codes),
// releases the lock once the trace of each shows a refused attempt (so each
// has read whatever it reads first), and returns how each ended, in order.
func raceWriters(h *harness.Harness, now int64, racers ...racer) []raceEnded {
	lock := h.HoldWriteLock()
	ps := make([]*harness.Traced, len(racers))
	for i, r := range racers {
		args := append(h.QueuectlArgs(r.verb, now, r.args...), h.PatientBusy()...)
		ps[i] = h.StartTraced(r.name, result.LaneQueuectl, "queuectl", now, nil, harness.LockCalls, args...)
	}
	why := "a writer that meets the lock waits for it (CONTRACT §2); the harness lets go only once every racer has read what it reads first"
	for _, p := range ps {
		p.WaitRefused(p.Name+" tries the write lock the harness holds", why)
	}
	lock.Release()
	out := make([]raceEnded, len(ps))
	for i, p := range ps {
		code, sig := p.Wait("the lock is free: each racer gets it in turn and ends")
		var lines []string
		for _, l := range p.Lines() {
			lines = append(lines, l.Text)
		}
		out[i] = raceEnded{name: p.Name, exit: harness.ExitText(code, sig), code: code, out: strings.Join(lines, "\n")}
		if sig != "" {
			out[i].code = -1
		}
	}
	return out
}

// codes is the racers' exit codes, sorted, as "0 12".
func codes(ends []raceEnded) string {
	var cs []int
	for _, e := range ends {
		cs = append(cs, e.code)
	}
	sort.Ints(cs)
	return strings.Trim(fmt.Sprint(cs), "[]")
}

// story is each racer's end and output, for messages.
func story(h *harness.Harness, ends []raceEnded) string {
	var parts []string
	for _, e := range ends {
		parts = append(parts, fmt.Sprintf("%s: %s, stdout %q", e.name, e.exit, harness.Trim(e.out)))
	}
	return strings.Join(parts, "; ")
}

// enqueueRace: two enqueues of one new id at once; one is new, the other a
// duplicate, and both succeed (CONTRACT §2 enqueue, writers).
func enqueueRace(h *harness.Harness) {
	h.Clause("§2.enqueue.concurrent")
	h.UseQueue("queue-race-enqueue.db")
	h.Init()
	args := []string{"--id", "n-1", "--qty", "7"}
	ends := raceWriters(h, t0, racer{"enqueue-A", "enqueue", args}, racer{"enqueue-B", "enqueue", args})
	why := "CONTRACT §2: the same id with the same qty again is a duplicate, success — also when the two arrive at once: the one that " +
		"finds the id taken answers duplicate, never an error about a constraint (check and insert in one statement or one immediate transaction)"
	h.Equal("two enqueues of n-1 at once: exit codes", "0 0", codes(ends), why+" ["+story(h, ends)+"]")
	var dups []string
	for _, e := range ends {
		var v struct {
			Duplicate *bool `json:"duplicate"`
		}
		if harness.DecodeObject(e.out, &v) != nil || v.Duplicate == nil {
			dups = append(dups, "unreadable")
			continue
		}
		dups = append(dups, fmt.Sprint(*v.Duplicate))
	}
	sort.Strings(dups)
	h.Equal("…one answer says duplicate false, the other duplicate true", "false true", strings.Join(dups, " "), why+" ["+story(h, ends)+"]")
}

// finishRace: two finishes under the one current token at once; exactly one
// is applied (CONTRACT §2 finish: the token is the fence).
func finishRace(h *harness.Harness) {
	h.Clause("§2.serial")
	h.UseQueue("queue-race-finish.db")
	h.Init()
	h.MustEnqueue("f-1", 7, t0)
	c := h.Claim("W", t0, 30000)
	h.ExpectExit("W claims f-1", 0, c.Run, "the race needs a leased job")
	tok := fmt.Sprint(c.Job.Token)
	ends := raceWriters(h, t0+1,
		racer{"finish-ok", "finish", []string{"--id", "f-1", "--token", tok, "--outcome", "ok"}},
		racer{"finish-permanent", "finish", []string{"--id", "f-1", "--token", tok, "--outcome", "permanent"}})
	why := "CONTRACT §2: a finish applies only while the job is leased under exactly its token, so of two reports of one grant " +
		"made at once exactly one is applied and the other is not applied (exit 12): a check of the state outside the " +
		"write that changes it lets both through, and the second overwrites the first"
	h.Equal("two finishes of f-1 under token "+tok+" at once: exit codes", "0 12", codes(ends), why+" ["+story(h, ends)+"]")
	j := h.MustShow("f-1").Job
	want := "done"
	for _, e := range ends {
		if e.code == 0 && e.name == "finish-permanent" {
			want = "dead(permanent)"
		}
	}
	h.Equal("f-1 is as the applied finish left it", want, stateReason(j), why)
}

// redriveRace: two redrives of one dead job at once; one redrives it, the
// other finds it pending (exit 9), one audit row (CONTRACT §2 redrive).
func redriveRace(h *harness.Harness) {
	h.Clause("§2.serial")
	h.UseQueue("queue-race-redrive.db")
	h.Init()
	h.MustEnqueue("d-1", 7, t0)
	c := h.Claim("W", t0, 30000)
	h.ExpectExit("W claims d-1", 0, c.Run, "the race needs a dead job")
	h.MustFinish("d-1", c.Job.Token, "permanent", t0+1)
	ends := raceWriters(h, t0+2,
		racer{"redrive-A", "redrive", []string{"--id", "d-1", "--note", "T-A"}},
		racer{"redrive-B", "redrive", []string{"--id", "d-1", "--note", "T-B"}})
	why := "CONTRACT §2: redrive is only for a dead job; of two at once the second finds the job pending (exit 9) and writes " +
		"nothing — two audit rows for one return from quarantine would say it was redriven twice"
	h.Equal("two redrives of d-1 at once: exit codes", "0 9", codes(ends), why+" ["+story(h, ends)+"]")
	s := h.MustShow("d-1")
	h.Equal("d-1: state and redrive rows", "pending redrives=1", fmt.Sprintf("%s redrives=%d", stateReason(s.Job), len(s.Redrives)), why)
}
