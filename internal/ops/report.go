package ops

import (
	"context"
	"fmt"
	"io"
	"strconv"

	"snacklab/queue"
)

// Report is the operator's view of the queue at one instant: everything the
// mission asks to observe so that the quarantine is not where failures go to
// be forgotten. Figures come from one read transaction and agree.
type Report struct {
	NowMs        int64                  `json:"now_ms"`
	Counts       map[queue.State]int64  `json:"counts"`
	DeadByReason map[queue.Reason]int64 `json:"dead_by_reason"`
	// DeadRatio is dead with the reason / all dead, 0 for every reason when
	// none is dead: the mix of causes, not a failure rate.
	DeadRatio map[queue.Reason]float64 `json:"dead_ratio"`
	// OldestDead is the job quarantined longest ago, nil when none is dead.
	OldestDead *DeadJob `json:"oldest_dead"`
	// LastInvestigationMs is the latest investigation of any job, nil if never.
	LastInvestigationMs    *int64 `json:"last_investigation_at"`
	LastInvestigationAgeMs *int64 `json:"last_investigation_age_ms"`
	Investigations         int64  `json:"investigations"`
	// Redrives counts audit rows; Redriven says what became of the jobs.
	Redrives int64          `json:"redrives"`
	Redriven RedriveResults `json:"redriven"`
}

// RedriveResults says what became of the jobs ever redriven, counted by
// their state now: a redrive that ends dead again is a fix that did not work.
type RedriveResults struct {
	Jobs     int64 `json:"jobs"`      // distinct jobs with at least one redrive
	Done     int64 `json:"done"`      // delivered since
	Dead     int64 `json:"dead"`      // quarantined again
	InFlight int64 `json:"in_flight"` // pending or leased: not decided yet
	Pending  int64 `json:"pending"`
	Leased   int64 `json:"leased"`
}

// Collect reads the queue's figures and measures ages against now (ms).
func Collect(ctx context.Context, q *queue.Queue, now int64) (Report, error) {
	s, err := q.Stats(ctx)
	if err != nil {
		return Report{}, err
	}
	return NewReport(s, now), nil
}

// NewReport derives the operator's figures from queue.Stats at now (ms).
func NewReport(s queue.Stats, now int64) Report {
	r := Report{
		NowMs:          now,
		Counts:         map[queue.State]int64{},
		DeadByReason:   map[queue.Reason]int64{},
		DeadRatio:      map[queue.Reason]float64{},
		Investigations: s.Investigations,
		Redrives:       s.Redrives,
	}
	for _, st := range queue.States() {
		r.Counts[st] = s.Counts[st]
	}
	dead := r.Counts[queue.Dead]
	for _, reason := range queue.Reasons() {
		n := s.DeadByReason[reason]
		r.DeadByReason[reason] = n
		r.DeadRatio[reason] = 0
		if dead > 0 {
			r.DeadRatio[reason] = float64(n) / float64(dead)
		}
	}
	if s.OldestDead != nil {
		d := deadJob(*s.OldestDead, now)
		r.OldestDead = &d
	}
	if s.Investigations > 0 {
		at, age := s.LastInvestigationMs, max(0, now-s.LastInvestigationMs)
		r.LastInvestigationMs, r.LastInvestigationAgeMs = &at, &age
	}
	rd := &r.Redriven
	rd.Done, rd.Dead = s.Redriven[queue.Done], s.Redriven[queue.Dead]
	rd.Pending, rd.Leased = s.Redriven[queue.Pending], s.Redriven[queue.Leased]
	rd.InFlight = rd.Pending + rd.Leased
	rd.Jobs = rd.Done + rd.Dead + rd.InFlight
	return r
}

// Total is the number of jobs in the file, whatever their state.
func (r Report) Total() int64 {
	var n int64
	for _, v := range r.Counts {
		n += v
	}
	return n
}

// WriteTable prints the report for a person at a terminal.
func WriteTable(w io.Writer, r Report) error {
	fmt.Fprintf(w, "%-20s%8s\n", "state", "jobs")
	for _, st := range queue.States() {
		fmt.Fprintf(w, "%-20s%8d\n", st, r.Counts[st])
	}
	fmt.Fprintf(w, "%-20s%8d\n\n", "total", r.Total())
	fmt.Fprintf(w, "%-20s%8s%8s\n", "dead by reason", "jobs", "ratio")
	for _, reason := range queue.Reasons() {
		fmt.Fprintf(w, "%-20s%8d%8.3f\n", reason, r.DeadByReason[reason], r.DeadRatio[reason])
	}
	fmt.Fprintln(w)
	if o := r.OldestDead; o != nil {
		fmt.Fprintf(w, "oldest dead:        %s (%s), dead for %s (since %s)\n", o.ID, o.Reason, HumanDuration(o.Age()), formatMs(o.SinceMs))
	} else {
		fmt.Fprintf(w, "oldest dead:        none\n")
	}
	if r.LastInvestigationMs != nil {
		fmt.Fprintf(w, "last investigation: %s ago (at %s), %d in all\n",
			HumanDuration(msDuration(*r.LastInvestigationAgeMs)), formatMs(*r.LastInvestigationMs), r.Investigations)
	} else {
		fmt.Fprintf(w, "last investigation: never\n")
	}
	rd := r.Redriven
	_, err := fmt.Fprintf(w, "redrives:           %d, of %d jobs: %d done since, %d dead again, %d in flight (%d pending, %d leased)\n",
		r.Redrives, rd.Jobs, rd.Done, rd.Dead, rd.InFlight, rd.Pending, rd.Leased)
	return err
}

// Prometheus metric names, by the Prometheus naming conventions: one prefix,
// base units (seconds), _total for counters, _ratio for 0..1 ratios.
const (
	MetricJobs                   = "snacklab_queue_jobs"
	MetricDeadJobs               = "snacklab_queue_dead_jobs"
	MetricDeadRatio              = "snacklab_queue_dead_ratio"
	MetricOldestDeadAge          = "snacklab_queue_oldest_dead_age_seconds"
	MetricLastInvestigation      = "snacklab_queue_last_investigation_timestamp_seconds"
	MetricInvestigations         = "snacklab_queue_investigations_total"
	MetricRedrives               = "snacklab_queue_redrives_total"
	MetricRedrivenJobs           = "snacklab_queue_redriven_jobs"
	MetricReportTimestampSeconds = "snacklab_queue_report_timestamp_seconds"
)

// WritePrometheus prints the report in the Prometheus text exposition format
// (version 0.0.4), ready for node_exporter's textfile collector. Ids never
// become labels: one series per job would grow without bound, and alerts, not
// metrics, are where ids belong.
func WritePrometheus(w io.Writer, r Report) error {
	pw := &promWriter{w: w}
	pw.family(MetricJobs, "gauge", "Jobs in the queue file by state.")
	for _, st := range queue.States() {
		pw.sample(MetricJobs, `state="`+string(st)+`"`, float64(r.Counts[st]))
	}
	pw.family(MetricDeadJobs, "gauge", "Quarantined (dead) jobs by reason.")
	for _, reason := range queue.Reasons() {
		pw.sample(MetricDeadJobs, `reason="`+string(reason)+`"`, float64(r.DeadByReason[reason]))
	}
	pw.family(MetricDeadRatio, "gauge", "Dead jobs with this reason divided by all dead jobs; 0 when none is dead.")
	for _, reason := range queue.Reasons() {
		pw.sample(MetricDeadRatio, `reason="`+string(reason)+`"`, r.DeadRatio[reason])
	}
	var oldest float64
	if r.OldestDead != nil {
		oldest = float64(r.OldestDead.AgeMs) / 1000
	}
	pw.family(MetricOldestDeadAge, "gauge", "Age of the job quarantined longest ago, at report time; 0 when none is dead.")
	pw.sample(MetricOldestDeadAge, "", oldest)
	var last float64
	if r.LastInvestigationMs != nil {
		last = float64(*r.LastInvestigationMs) / 1000
	}
	pw.family(MetricLastInvestigation, "gauge", "When someone last recorded an investigation, in seconds since the epoch; 0 if never.")
	pw.sample(MetricLastInvestigation, "", last)
	pw.family(MetricInvestigations, "counter", "Investigations ever recorded.")
	pw.sample(MetricInvestigations, "", float64(r.Investigations))
	pw.family(MetricRedrives, "counter", "Redrives ever recorded (audit rows).")
	pw.sample(MetricRedrives, "", float64(r.Redrives))
	pw.family(MetricRedrivenJobs, "gauge", "Jobs ever redriven, by what became of them: done, dead again, or in flight (pending or leased).")
	pw.sample(MetricRedrivenJobs, `result="done"`, float64(r.Redriven.Done))
	pw.sample(MetricRedrivenJobs, `result="dead"`, float64(r.Redriven.Dead))
	pw.sample(MetricRedrivenJobs, `result="in_flight"`, float64(r.Redriven.InFlight))
	pw.family(MetricReportTimestampSeconds, "gauge", "The clock the ages above were measured against, in seconds since the epoch.")
	pw.sample(MetricReportTimestampSeconds, "", float64(r.NowMs)/1000)
	return pw.err
}

type promWriter struct {
	w   io.Writer
	err error
}

func (p *promWriter) printf(format string, args ...any) {
	if p.err == nil {
		_, p.err = fmt.Fprintf(p.w, format, args...)
	}
}

func (p *promWriter) family(name, typ, help string) {
	p.printf("# HELP %s %s\n# TYPE %s %s\n", name, help, name, typ)
}

func (p *promWriter) sample(name, labels string, v float64) {
	if labels != "" {
		labels = "{" + labels + "}"
	}
	p.printf("%s%s %s\n", name, labels, strconv.FormatFloat(v, 'f', -1, 64))
}
