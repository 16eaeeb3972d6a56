package ops

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"snacklab/queue"
)

// MaxAlertIDs bounds the ids one alert line names; the rest are counted.
const MaxAlertIDs = 10

// Thresholds are the limits an alert run checks. A nil field is not checked.
// Every limit is a maximum that is still fine: only going past it alerts, so
// a probe run exactly at the boundary stays quiet.
type Thresholds struct {
	MaxDead      *int64                   // alert when more jobs than this are dead
	MaxOldestAge *time.Duration           // alert when a dead job is older than this
	MaxRatio     map[queue.Reason]float64 // alert when dead-with-reason / dead exceeds this
}

// Empty reports whether no threshold is set, which is a usage mistake: a
// probe that checks nothing would always say all is well.
func (t Thresholds) Empty() bool {
	return t.MaxDead == nil && t.MaxOldestAge == nil && len(t.MaxRatio) == 0
}

// Validate refuses limits that cannot be crossed sensibly.
func (t Thresholds) Validate() error {
	if t.MaxDead != nil && *t.MaxDead < 0 {
		return fmt.Errorf("%w: max dead %d: want >= 0", queue.ErrInvalid, *t.MaxDead)
	}
	if t.MaxOldestAge != nil && *t.MaxOldestAge < 0 {
		return fmt.Errorf("%w: max oldest age %s: want a duration >= 0", queue.ErrInvalid, *t.MaxOldestAge)
	}
	for reason, r := range t.MaxRatio {
		if _, err := queue.ParseReason(string(reason)); err != nil {
			return err
		}
		if !(r >= 0 && r <= 1) {
			return fmt.Errorf("%w: max ratio %s=%v: want 0 to 1", queue.ErrInvalid, reason, r)
		}
	}
	return nil
}

// ParseRatio reads one REASON=R limit, as given to --max-ratio.
func ParseRatio(s string) (queue.Reason, float64, error) {
	name, val, ok := strings.Cut(s, "=")
	if !ok {
		return "", 0, fmt.Errorf("%w: max ratio %q: want REASON=R, e.g. permanent=0.5", queue.ErrInvalid, s)
	}
	reason, err := queue.ParseReason(name)
	if err != nil {
		return "", 0, err
	}
	r, err := strconv.ParseFloat(val, 64)
	if err != nil || !(r >= 0 && r <= 1) {
		return "", 0, fmt.Errorf("%w: max ratio %q: want a number from 0 to 1", queue.ErrInvalid, s)
	}
	return reason, r, nil
}

// Breach is one threshold crossed. It names ids and reasons only: alerts go
// to mail, chat and pagers, where an order's content has no business.
type Breach struct {
	Check     string       `json:"check"`            // max_dead, max_oldest_age or max_ratio
	Reason    queue.Reason `json:"reason,omitempty"` // for max_ratio
	Value     float64      `json:"value"`            // dead jobs, age in seconds, or ratio
	Threshold float64      `json:"threshold"`        // in the same unit as Value
	IDs       []string     `json:"ids"`              // at most MaxAlertIDs, oldest first
	MoreIDs   int          `json:"more_ids"`         // how many more jobs the breach covers
	Message   string       `json:"message"`          // the line printed for people
}

// Evaluate checks the thresholds against the queue at now (ms) and returns
// the breaches, none when all is well.
func Evaluate(ctx context.Context, q *queue.Queue, now int64, t Thresholds) ([]Breach, error) {
	if err := t.Validate(); err != nil {
		return nil, err
	}
	r, err := Collect(ctx, q, now)
	if err != nil {
		return nil, err
	}
	dead, err := ListDead(ctx, q, "", nil, now)
	if err != nil {
		return nil, err
	}
	breaches := []Breach{}
	pick := func(b Breach, keep func(DeadJob) bool) Breach {
		var all []string
		for _, d := range dead {
			if keep(d) {
				all = append(all, d.ID+"("+string(d.Reason)+")")
				if len(b.IDs) < MaxAlertIDs {
					b.IDs = append(b.IDs, d.ID)
				}
			}
		}
		if b.IDs == nil {
			b.IDs = []string{}
		}
		b.MoreIDs = len(all) - len(b.IDs)
		b.Message += "; ids: " + joinIDs(all, MaxAlertIDs)
		return b
	}
	if t.MaxDead != nil && r.Counts[queue.Dead] > *t.MaxDead {
		n := r.Counts[queue.Dead]
		var mix []string
		for _, reason := range queue.Reasons() {
			mix = append(mix, fmt.Sprintf("%s=%d", reason, r.DeadByReason[reason]))
		}
		breaches = append(breaches, pick(Breach{Check: "max_dead", Value: float64(n), Threshold: float64(*t.MaxDead),
			Message: fmt.Sprintf("ALERT max-dead: %d dead > %d (%s)", n, *t.MaxDead, strings.Join(mix, " "))},
			func(DeadJob) bool { return true }))
	}
	if t.MaxOldestAge != nil && r.OldestDead != nil && r.OldestDead.AgeMs > t.MaxOldestAge.Milliseconds() {
		o, limit := r.OldestDead, t.MaxOldestAge.Milliseconds()
		// Human durations, except where rounding would hide the point: a
		// limit it cannot show exactly is shown as given, and an age just
		// past its limit that would read the same is shown exactly.
		age, limitText := HumanDuration(o.Age()), HumanDuration(msDuration(limit))
		if !humanExact(msDuration(limit)) {
			limitText = msDuration(limit).String()
		}
		if age == limitText {
			age = o.Age().String()
		}
		breaches = append(breaches, pick(Breach{Check: "max_oldest_age", Value: float64(o.AgeMs) / 1000,
			Threshold: float64(limit) / 1000,
			Message:   fmt.Sprintf("ALERT max-oldest-age: oldest dead %s (%s) dead for %s > %s", o.ID, o.Reason, age, limitText)},
			func(d DeadJob) bool { return d.AgeMs > limit }))
	}
	for _, reason := range queue.Reasons() {
		limit, ok := t.MaxRatio[reason]
		if !ok || r.DeadRatio[reason] <= limit {
			continue
		}
		ratio := r.DeadRatio[reason]
		breaches = append(breaches, pick(Breach{Check: "max_ratio", Reason: reason, Value: ratio, Threshold: limit,
			Message: fmt.Sprintf("ALERT max-ratio %s: %.3f > %s (%d of %d dead)",
				reason, ratio, strconv.FormatFloat(limit, 'f', -1, 64), r.DeadByReason[reason], r.Counts[queue.Dead])},
			func(d DeadJob) bool { return d.Reason == reason }))
	}
	return breaches, nil
}
