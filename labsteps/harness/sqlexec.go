package harness

import (
	"context"
	"database/sql"
	"net/url"
	"path/filepath"

	"snacklab/labsteps/result"
)

// BreakQueue runs script on the queue file as another program editing it by
// hand would (foreign keys off, as SQLite opens a file by default), so that a
// step can leave a rule of CONTRACT §2 broken and see whether `check` finds
// it. It relies only on what the contract lets graders rely on: the table
// jobs keyed by its column id.
func (h *Harness) BreakQueue(what, script string) {
	abs, _ := filepath.Abs(h.DB)
	db, err := sql.Open("sqlite", "file:"+(&url.URL{Path: abs}).EscapedPath()+"?mode=rw&_busy_timeout=5000")
	if err == nil {
		_, err = db.ExecContext(context.WithoutCancel(h.ctx), script)
		if cerr := db.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		h.Fatalf("the harness edits the queue file: "+what, "the edit is made", "the step checks that `queuectl check` finds it (CONTRACT §2: graders may rely on the table jobs keyed by its column id)", "%v", err)
	}
	h.Action("harness edits the queue file by hand: "+what, result.NoClock)
}
