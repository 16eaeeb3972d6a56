package harness

import (
	"context"
	"time"

	"snacklab/labsteps/result"
)

// BreakQueue runs script on the queue file as another program editing it by
// hand would (foreign keys off, as SQLite opens a file by default), so that a
// step can leave a rule of CONTRACT §2 broken and see whether `check` finds
// it. It relies only on what the contract lets graders rely on: the table
// jobs keyed by its column id.
func (h *Harness) BreakQueue(what, script string) {
	err := h.execSQL(SQLiteDSN(h.DB, 5000), script)
	if err != nil && WaitedOut(err) {
		h.Timeout("the harness edits the queue file: "+what, "the edit is made within "+SQLHelperLimit.String(), err.Error(), "the step checks the edit next")
	}
	if err != nil {
		h.Fatalf("the harness edits the queue file: "+what, "the edit is made", "the step checks that `queuectl check` finds it (CONTRACT §2: graders may rely on the table jobs keyed by its column id)", "%v", err)
	}
	h.Action("harness edits the queue file by hand: "+what, result.NoClock)
}

// SQLHelperLimit bounds one execSQL: the edit runs even when the step's
// context has ended (the cleanup needs it), but a helper a judged program
// stopped, or a lock it holds forever, must not hold the judge.
var SQLHelperLimit = time.Minute

// execSQL runs script on the SQLite file of dsn with a hand of its own
// (SQLHand: as the judged when there is one), then closes it, within
// SQLHelperLimit.
func (h *Harness) execSQL(dsn, script string) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(h.ctx), SQLHelperLimit)
	defer cancel()
	hand, err := h.openSQL(ctx, dsn)
	if err != nil {
		return err
	}
	err = hand.Exec(ctx, script)
	if cerr := hand.Close(); err == nil {
		err = cerr
	}
	return err
}
