package harness

import (
	"strings"

	"snacklab/labsteps/result"
)

// Trap makes every write of one job's row in the queue file fail, until
// Remove: the harness adds triggers to the file that abort any UPDATE,
// DELETE or INSERT of that row, so a change written as an update, as a
// delete and insert, or as INSERT OR REPLACE fails alike (the contract fixes
// the tables, not the statements that write them). It is how step 5 makes a
// redrive fail after its audit row and before its state change and then
// checks that the audit row went with it. The jobs table is part of the
// contract (CONTRACT §2: graders may rely on table jobs keyed by id), so
// this works for any implementation that keeps to it, and says so plainly
// when the table is missing. The triggers are gone before anything is
// judged.
type Trap struct {
	h     *Harness
	names []string
}

// trapped are the writes a trap aborts, each with the row it names.
var trapped = []struct{ event, row string }{{"UPDATE", "OLD"}, {"DELETE", "OLD"}, {"INSERT", "NEW"}}

// TrapUpdates makes every write of job id's row (update, delete, insert)
// fail with an error naming the trap.
func (h *Harness) TrapUpdates(id string) *Trap {
	base := "lab_trap_" + strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return '_'
	}, id)
	t := &Trap{h: h}
	lit := "'" + strings.ReplaceAll(id, "'", "''") + "'"
	h.OnCleanup(t.drop)
	for _, w := range trapped {
		name := base + "_" + strings.ToLower(w.event)
		t.names = append(t.names, name)
		t.exec("CREATE TRIGGER " + name + " BEFORE " + w.event + " ON jobs WHEN " + w.row + ".id = " + lit +
			" BEGIN SELECT RAISE(ABORT, 'lab trap: this " + strings.ToLower(w.event) + " of " + strings.ReplaceAll(id, "'", "''") + " fails on purpose'); END")
	}
	h.Action("trap: every write of "+id+"'s row (update, delete, insert) now fails (triggers in the queue file)", result.NoClock)
	return t
}

// Remove drops the triggers.
func (t *Trap) Remove() {
	t.drop()
	t.h.Action("trap removed", result.NoClock)
}

func (t *Trap) drop() {
	for _, name := range t.names {
		t.exec("DROP TRIGGER IF EXISTS " + name)
	}
	t.names = nil
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
