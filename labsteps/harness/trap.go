package harness

import (
	"strings"

	"snacklab/labsteps/result"
)

// Trap makes every UPDATE of one job in the queue file fail, until Remove:
// the harness adds a trigger to the file that aborts the statement. It is how
// step 5 makes a redrive fail after its audit row and before its state change
// and then checks that the audit row went with it. The jobs table is part of
// the contract (CONTRACT §2: graders may rely on table jobs keyed by id), so
// this works for any implementation that keeps to it, and says so plainly
// when the table is missing. It is, with WriteLock, the only place the lab
// opens the queue file itself, and the trigger is gone before anything is
// judged.
type Trap struct {
	h    *Harness
	name string
}

// TrapUpdates makes every UPDATE of job id fail with an error naming the trap.
func (h *Harness) TrapUpdates(id string) *Trap {
	t := &Trap{h: h, name: "lab_trap_" + strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return '_'
	}, id)}
	lit := "'" + strings.ReplaceAll(id, "'", "''") + "'"
	t.exec("CREATE TRIGGER " + t.name + " BEFORE UPDATE ON jobs WHEN OLD.id = " + lit +
		" BEGIN SELECT RAISE(ABORT, 'lab trap: this update of " + strings.ReplaceAll(id, "'", "''") + " fails on purpose'); END")
	h.OnCleanup(func() {
		if t.name != "" {
			t.exec("DROP TRIGGER IF EXISTS " + t.name)
		}
	})
	h.Action("trap: every UPDATE of "+id+" now fails (a trigger in the queue file)", result.NoClock)
	return t
}

// Remove drops the trigger.
func (t *Trap) Remove() {
	t.exec("DROP TRIGGER IF EXISTS " + t.name)
	t.h.Action("trap removed", result.NoClock)
}

func (t *Trap) exec(stmt string) {
	h := t.h
	why := "the step makes one update fail on purpose to see what a failed transaction leaves behind"
	err := h.execSQL(queueDSN(h.DB), stmt)
	if err != nil && strings.Contains(err.Error(), "no such table") {
		h.Fatalf("the queue file has the table `jobs` keyed by `id`", "the schema of queue/schema.sql (CONTRACT §2)",
			"CONTRACT §2 makes the queue file's schema part of the contract: graders may rely on the table jobs and its "+
				"id column, and this step adds a trigger on it to make one update fail on purpose",
			"no table jobs in %s (%v)", h.DB, err)
	}
	if err != nil {
		h.Fatalf("the harness changes its trap in the queue file", "the statement succeeds", why, "%s: %v", stmt, err)
	}
}
