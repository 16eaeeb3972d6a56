package ops

import (
	"bytes"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"html/template"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"snacklab/queue"
)

//go:embed dashboard.tmpl
var dashboardTmpl string

var dashboardPage = template.Must(template.New("dashboard").Parse(dashboardTmpl))

// DashboardDeadRows bounds the dead list on the page; the rest are counted.
const DashboardDeadRows = 500

// Dashboard serves a read-only page of the figures and the dead list, and
// /metrics in the Prometheus text format. It answers only GET and HEAD:
// redrive stays a CLI action, because a redrive assumes a person approved it
// and nothing here checks who is asking.
type Dashboard struct {
	q     *queue.Queue
	nowMs func() int64
	th    Thresholds
	mux   *http.ServeMux
}

// SetThresholds makes the page check th as `queuectl alerts` does and show
// each threshold crossed first, highlighted, under "Attention". Without
// thresholds the page only shows the figures.
func (d *Dashboard) SetThresholds(th Thresholds) error {
	if err := th.Validate(); err != nil {
		return err
	}
	d.th = th
	return nil
}

// ReasonColor gives each reason its own colour on the page (chart, dead
// list), so a glance tells a wave of deadlines from a bad payload.
var ReasonColor = map[queue.Reason]string{
	queue.ReasonPermanent: "#c0392b", // red: the content is bad, retrying never helps
	queue.ReasonExhausted: "#d68910", // amber: ran out of attempts, often a long outage
	queue.ReasonDeadline:  "#2471a3", // blue: ran out of time
}

// NewDashboard serves q, measuring ages against nowMs (nil: the wall clock).
func NewDashboard(q *queue.Queue, nowMs func() int64) *Dashboard {
	if nowMs == nil {
		nowMs = func() int64 { return time.Now().UnixMilli() }
	}
	d := &Dashboard{q: q, nowMs: nowMs, mux: http.NewServeMux()}
	d.mux.HandleFunc("/{$}", d.page)
	d.mux.HandleFunc("/metrics", d.metrics)
	return d
}

func (d *Dashboard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "read-only: redrive with queuectl", http.StatusMethodNotAllowed)
		return
	}
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	d.mux.ServeHTTP(w, r)
}

func (d *Dashboard) metrics(w http.ResponseWriter, r *http.Request) {
	rep, err := Collect(r.Context(), d.q, d.nowMs())
	if err != nil {
		http.Error(w, "stats: "+err.Error(), http.StatusServiceUnavailable)
		return
	}
	var buf bytes.Buffer
	if err := WritePrometheus(&buf, rep); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	w.Write(buf.Bytes())
}

type stateRow struct {
	Name  queue.State
	Count int64
}

type reasonRow struct {
	Name         queue.Reason
	Color        string
	Count        int64
	Ratio        string
	BarY, TextY  int
	BarW, LabelX int
}

type deadRow struct {
	DeadJob
	Since, AgeText, Color string
	Evidence              []string // each attempt, oldest first
	Investigation         string   // the latest look, "" when none
}

// HonestRatioMin is the fewest dead jobs for which a reason's share is
// shown as a percentage: below it, "1 of 1" says more than "100.0%".
const HonestRatioMin = 20

// HonestRatio is a reason's share of the dead jobs as a person should read
// it: a count ("1 of 1") while there are too few for a percentage to mean
// anything, then the percentage with its count ("45.0% (9 of 20)").
func HonestRatio(n, dead int64) string {
	if dead < HonestRatioMin {
		return fmt.Sprintf("%d of %d", n, dead)
	}
	return fmt.Sprintf("%s%% (%d of %d)", strconv.FormatFloat(float64(n)*100/float64(dead), 'f', 1, 64), n, dead)
}

type breachRow struct {
	Breach
	Text string // the alert line without its id list (the dead list is below)
}

type dashView struct {
	Now                  string
	States               []stateRow
	Total, Dead          int64
	Reasons              []reasonRow
	ChartH               int
	Oldest               *deadRow
	LastInvestigation    string
	LastInvestigationAge string
	Investigations       int64
	Redrives             int64
	Redriven             RedriveResults
	DeadRows             []deadRow
	DeadMore             int
	Checked              bool        // thresholds were given
	Breaches             []breachRow // thresholds crossed
	Crossed              map[string]bool
}

func (d *Dashboard) page(w http.ResponseWriter, r *http.Request) {
	now := d.nowMs()
	rep, err := Collect(r.Context(), d.q, now)
	if err != nil {
		http.Error(w, "stats: "+err.Error(), http.StatusServiceUnavailable)
		return
	}
	// Only the rows shown are read, with their evidence; the rest are counted.
	dead, err := ListDead(r.Context(), d.q, "", nil, now, DashboardDeadRows)
	var trails map[string]queue.Trail
	if err == nil {
		trails, err = WithTrails(r.Context(), d.q, dead)
	}
	if err != nil {
		http.Error(w, "dead: "+err.Error(), http.StatusServiceUnavailable)
		return
	}
	v := dashView{Now: formatMs(now), Total: rep.Total(), Dead: rep.Counts[queue.Dead],
		Investigations: rep.Investigations, Redrives: rep.Redrives, Redriven: rep.Redriven,
		LastInvestigation: "never", DeadRows: []deadRow{}, Checked: !d.th.Empty(), Crossed: map[string]bool{}}
	if v.Checked {
		breaches, err := Evaluate(r.Context(), d.q, now, d.th)
		if err != nil {
			http.Error(w, "alerts: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		for _, b := range breaches {
			text, _, _ := strings.Cut(b.Message, "; ids: ")
			v.Breaches = append(v.Breaches, breachRow{b, strings.TrimPrefix(text, "ALERT ")})
			v.Crossed[b.Check] = true
			if b.Reason != "" {
				v.Crossed["ratio-"+string(b.Reason)] = true
			}
		}
	}
	for _, st := range queue.States() {
		v.States = append(v.States, stateRow{st, rep.Counts[st]})
	}
	const barMax, rowH = 300, 32
	var most int64
	for _, reason := range queue.Reasons() {
		most = max(most, rep.DeadByReason[reason])
	}
	for i, reason := range queue.Reasons() {
		n := rep.DeadByReason[reason]
		row := reasonRow{Name: reason, Color: ReasonColor[reason], Count: n, Ratio: HonestRatio(n, rep.Counts[queue.Dead]),
			BarY: i*rowH + 6, TextY: i*rowH + 23}
		if most > 0 {
			row.BarW = int(barMax * n / most)
		}
		row.LabelX = 100 + row.BarW + 8
		v.Reasons = append(v.Reasons, row)
	}
	v.ChartH = len(v.Reasons)*rowH + 8
	if o := rep.OldestDead; o != nil {
		v.Oldest = &deadRow{DeadJob: *o, Since: formatMs(o.SinceMs), AgeText: HumanDuration(o.Age()), Color: ReasonColor[o.Reason]}
	}
	if rep.LastInvestigationMs != nil {
		v.LastInvestigation = formatMs(*rep.LastInvestigationMs)
		v.LastInvestigationAge = HumanDuration(msDuration(*rep.LastInvestigationAgeMs))
	}
	v.DeadMore = int(max(0, rep.Counts[queue.Dead]-int64(len(dead))))
	for _, j := range dead {
		row := deadRow{DeadJob: j, Since: formatMs(j.SinceMs), AgeText: HumanDuration(j.Age()), Color: ReasonColor[j.Reason]}
		for _, a := range trails[j.ID].Attempts {
			row.Evidence = append(row.Evidence, AttemptText(a, now))
		}
		if i := j.Investigation; i != nil {
			row.Investigation = i.Note + " at " + HumanTime(i.AtMs, now)
		}
		v.DeadRows = append(v.DeadRows, row)
	}
	var buf bytes.Buffer
	if err := dashboardPage.Execute(&buf, v); err != nil {
		http.Error(w, "render: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Write(buf.Bytes())
}

// Serve listens on addr, calls ready with the bound address (so a caller
// asking for port 0 learns the port), and serves h until ctx is done, then
// shuts down gracefully.
func Serve(ctx context.Context, addr string, h http.Handler, ready func(net.Addr)) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
		WriteTimeout: 30 * time.Second, IdleTimeout: 60 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	if ready != nil {
		ready(ln.Addr())
	}
	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve: %w", err)
	}
	return nil
}
