package main

import (
	"flag"
	"fmt"
	"io"

	"snacklab/internal/cliflag"
	"snacklab/internal/ops"
	"snacklab/queue"
)

// writeHistory prints a job, its attempts with their evidence, and its
// audit trail for a person, every instant in ISO and relative to now.
func writeHistory(w io.Writer, h queue.History, now int64) {
	j := h.Job
	fmt.Fprintf(w, "%s qty=%d %s%s attempts=%d/%d token=%d\n",
		j.ID, j.Qty, j.State, reasonSuffix(j), j.Attempts, j.MaxAttempts, j.Token)
	switch j.State {
	case queue.Pending:
		fmt.Fprintf(w, "  available at %s\n", ops.HumanTime(j.AvailableAt, now))
	case queue.Leased:
		fmt.Fprintf(w, "  leased to %s until %s\n", j.Owner, ops.HumanTime(j.LeaseUntil, now))
	case queue.Done, queue.Dead:
		fmt.Fprintf(w, "  %s at %s\n", j.State, ops.HumanTime(j.UpdatedAt, now))
	}
	if j.State == queue.Pending || j.State == queue.Leased {
		fmt.Fprintf(w, "  deadline %s\n", ops.HumanTime(j.DeadlineAt, now))
	}
	for _, a := range h.Attempts {
		fmt.Fprintf(w, "  attempt %s (token %d)\n", ops.AttemptText(a, now), a.Token)
	}
	for _, r := range h.Redrives {
		fmt.Fprintf(w, "  redrive at %s: was %s with token %d, note %s\n", ops.HumanTime(r.AtMs, now), r.PrevReason, r.PrevToken, r.Note)
	}
	for _, i := range h.Investigations {
		fmt.Fprintf(w, "  investigated at %s, note %s\n", ops.HumanTime(i.AtMs, now), i.Note)
	}
}

// evidenceFlags defines --status and --error (CONTRACT.md §3, finish
// evidence) and returns what reads them.
func evidenceFlags(fs *flag.FlagSet) func() (queue.Evidence, error) {
	status := cliflag.NewInt(fs, "status", 0, 0, 599, "evidence: the HTTP status of the attempt (100-599; 0 or absent: no answer)")
	class := fs.String("error", "", "evidence: why it failed, one of timeout refused reset closed transport http 3xx badack")
	return func() (queue.Evidence, error) {
		ev := queue.Evidence{Status: int(status.Get())}
		c, err := queue.ParseErrorClass(*class)
		if err != nil {
			return ev, err
		}
		ev.Error = c
		return ev, ev.Check()
	}
}

func reasonSuffix(j queue.Job) string {
	if j.Reason == "" {
		return ""
	}
	return " (" + string(j.Reason) + ")"
}
