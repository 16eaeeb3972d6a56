// Package ops is what an operator needs to keep the quarantine looked after:
// the figures (stats as a table, JSON or Prometheus text), the alerts, the
// list of dead jobs, a paced bulk redrive and a read-only dashboard.
//
// Everything here reads the queue through queue's exported API and writes
// only through queue.Redrive, so the audit rules of CONTRACT.md hold for bulk
// work exactly as for a single redrive. Nothing here ever prints a job's qty
// or any other content of an order: alerts and lists leave the machine (mail,
// chat, monitoring), and only identifiers belong there.
package ops

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"snacklab/queue"
)

// DeadJob is a quarantined job as an operator sees it: identifiers and
// delivery bookkeeping only, never the order's content.
type DeadJob struct {
	ID          string       `json:"id"`
	Reason      queue.Reason `json:"reason"`
	Attempts    int64        `json:"attempts"`
	MaxAttempts int64        `json:"max_attempts"`
	Token       int64        `json:"token"`
	SinceMs     int64        `json:"since_ms"` // when it died (the job's updated_at)
	AgeMs       int64        `json:"age_ms"`   // now - since, never negative
	// LastAttempt is the evidence of its last attempt (null when none was
	// kept) and Investigation its latest look (null when none), both
	// filled by WithTrails.
	LastAttempt   *queue.Attempt       `json:"last_attempt"`
	Investigation *queue.Investigation `json:"investigation"`
}

func deadJob(j queue.Job, now int64) DeadJob {
	return DeadJob{ID: j.ID, Reason: j.Reason, Attempts: j.Attempts, MaxAttempts: j.MaxAttempts,
		Token: j.Token, SinceMs: j.UpdatedAt, AgeMs: max(0, now-j.UpdatedAt)}
}

// Age is AgeMs as a duration, for people.
func (d DeadJob) Age() time.Duration { return msDuration(d.AgeMs) }

// ListDead lists quarantined jobs oldest first, optionally only those with
// reason (when not "") and only those strictly older than *olderThan at now
// (when olderThan is not nil): a job that died exactly olderThan ago is not
// listed, so a cron job run at the boundary sees it on its next run.
// At most limit jobs are listed when one is given and > 0.
func ListDead(ctx context.Context, q *queue.Queue, reason queue.Reason, olderThan *time.Duration, now int64, limit ...int) ([]DeadJob, error) {
	if olderThan != nil && *olderThan < 0 {
		return nil, fmt.Errorf("%w: older than %s: want a duration >= 0", queue.ErrInvalid, *olderThan)
	}
	diedAtOrBefore := queue.AllDead
	if olderThan != nil {
		diedAtOrBefore = now - olderThan.Milliseconds() - 1 // strictly older
	}
	jobs, err := q.ListDead(ctx, reason, diedAtOrBefore, limit...)
	if err != nil {
		return nil, err
	}
	out := make([]DeadJob, 0, len(jobs))
	for _, j := range jobs {
		out = append(out, deadJob(j, now))
	}
	return out, nil
}

// WithTrails fills each job's last evidence and latest investigation, and
// returns every job's trail (all its attempts) by id.
func WithTrails(ctx context.Context, q *queue.Queue, jobs []DeadJob) (map[string]queue.Trail, error) {
	ids := make([]string, len(jobs))
	for i, j := range jobs {
		ids[i] = j.ID
	}
	trails, err := q.Trails(ctx, ids)
	if err != nil {
		return nil, err
	}
	for i := range jobs {
		t := trails[jobs[i].ID]
		jobs[i].LastAttempt, jobs[i].Investigation = t.Last(), t.LastInvestigation
	}
	return trails, nil
}

// HumanTime is an instant for people: UTC ISO 8601 to the millisecond, and
// how far it is from now ("in 30s", "2m05s ago").
func HumanTime(ms, now int64) string {
	switch d := msDuration(ms - now); {
	case d > 0:
		return formatMs(ms) + " (in " + HumanDuration(d) + ")"
	case d < 0:
		return formatMs(ms) + " (" + HumanDuration(-d) + " ago)"
	}
	return formatMs(ms) + " (now)"
}

// AttemptText is one attempt for people: "#2 retry 503 http at T (5m ago)".
func AttemptText(a queue.Attempt, now int64) string {
	return fmt.Sprintf("#%d %s %s at %s", a.Attempt, a.Outcome, a.Evidence, HumanTime(a.AtMs, now))
}

// ParseReasonFilter accepts "" (every reason) or a reason name.
func ParseReasonFilter(s string) (queue.Reason, error) {
	if s == "" {
		return "", nil
	}
	return queue.ParseReason(s)
}

func msDuration(ms int64) time.Duration { return time.Duration(ms) * time.Millisecond }

// formatMs is a timestamp in ms as UTC RFC 3339 with milliseconds, for people.
func formatMs(ms int64) string {
	return time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z")
}

// joinIDs names at most limit ids, then how many more there are, so an alert
// line stays short whatever the size of the quarantine.
func joinIDs(ids []string, limit int) string {
	if len(ids) <= limit {
		return strings.Join(ids, " ")
	}
	return strings.Join(ids[:limit], " ") + " +" + strconv.Itoa(len(ids)-limit) + " more"
}

// WriteDeadTable prints dead jobs for a person: identifiers, bookkeeping and
// since when, nothing of the order.
func WriteDeadTable(w io.Writer, jobs []DeadJob) error {
	if len(jobs) == 0 {
		_, err := fmt.Fprintln(w, "no dead jobs match")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "ID\tREASON\tATTEMPTS\tTOKEN\tDEAD SINCE\tAGE\tLAST EVIDENCE\tINVESTIGATION\n")
	for _, j := range jobs {
		last, inv := "-", "-"
		if a := j.LastAttempt; a != nil {
			last = fmt.Sprintf("#%d %s %s", a.Attempt, a.Outcome, a.Evidence)
		}
		if i := j.Investigation; i != nil {
			inv = i.Note
		}
		fmt.Fprintf(tw, "%s\t%s\t%d/%d\t%d\t%s\t%s\t%s\t%s\n", j.ID, j.Reason, j.Attempts, j.MaxAttempts, j.Token, formatMs(j.SinceMs), HumanDuration(j.Age()), last, inv)
	}
	return tw.Flush()
}

// WriteBulkSummary prints what a bulk redrive did, in one line.
func WriteBulkSummary(w io.Writer, r BulkResult, perSecond float64) error {
	if r.DryRun {
		_, err := fmt.Fprintf(w, "dry run: would redrive %d dead (%s) jobs under %s at %s/s, taking at least %s; nothing changed\n",
			len(r.WouldRedrive), r.Reason, r.Note, strconv.FormatFloat(perSecond, 'f', -1, 64), MinDuration(len(r.WouldRedrive), perSecond))
		return err
	}
	fmt.Fprintf(w, "redrove %d of %d dead (%s) jobs under %s; skipped %d no longer dead", len(r.Redriven), r.Candidates, r.Reason, r.Note, len(r.Skipped))
	if r.Interrupted {
		fmt.Fprintf(w, "; interrupted with %d not attempted: re-run the same command to continue", r.NotAttempted)
	}
	_, err := fmt.Fprintln(w)
	return err
}

// MinDuration is the least time n jobs take at perSecond with a burst of one.
func MinDuration(n int, perSecond float64) time.Duration {
	if n <= 1 || perSecond <= 0 {
		return 0
	}
	return time.Duration(float64(n-1) / perSecond * float64(time.Second)).Round(time.Millisecond)
}
