package ops_test

import (
	"context"
	"fmt"
	"maps"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"snacklab/internal/chromiumtest"
	"snacklab/internal/ops"
	"snacklab/internal/ops/opstest"
	"snacklab/queue"
)

// shown is what the page displays, read by the browser after rendering.
type shown struct {
	Cells     map[string]string `json:"cells"`
	Rows      [][]string        `json:"rows"`
	Bars      []bar             `json:"bars"`
	Text      string            `json:"text"`
	Resources int               `json:"resources"`
	Layout    layout            `json:"layout"`
}

// layout is where things landed and how they are drawn, as laid out.
type layout struct {
	ViewW, ViewH float64
	DeadTop      float64    // the dead list's top edge
	DeadW, TopW  float64    // widths of the dead list's card and of the top row
	BarFill      []string   // computed fill of each reason's bar, in order
	RowReason    [][]string // each dead row's reason and its computed colour
	Breaches     [][]string // each crossed threshold: check, text, background
	CrossedRows  []string   // rows highlighted as crossed, by their first cell
}

type bar struct {
	Reason string  `json:"reason"`
	Count  string  `json:"count"`
	Width  float64 `json:"width"` // as laid out, from getBBox
}

const readPage = `(() => {
	const cells = {};
	for (const el of document.querySelectorAll('[id]')) {
		if (!el.children.length || el.tagName === 'TD') cells[el.id] = el.textContent.trim();
	}
	return {
		cells,
		rows: [...document.querySelectorAll('#dead-list tr[data-id]')].map(tr => [...tr.cells].map(c => c.textContent.trim())),
		bars: [...document.querySelectorAll('#reason-chart rect')].map(r => ({reason: r.dataset.reason, count: r.dataset.count, width: r.getBBox().width})),
		text: document.body.innerText,
		resources: performance.getEntriesByType('resource').length,
		layout: {
			ViewW: innerWidth, ViewH: innerHeight,
			DeadTop: document.querySelector('#dead-list').getBoundingClientRect().top,
			DeadW: document.querySelector('#dead-card').getBoundingClientRect().width,
			TopW: document.querySelector('.top').getBoundingClientRect().width,
			BarFill: [...document.querySelectorAll('#reason-chart rect')].map(r => getComputedStyle(r).fill),
			RowReason: [...document.querySelectorAll('#dead-list tr[data-id]')].map(tr => [tr.cells[1].textContent.trim(), getComputedStyle(tr.cells[1]).color]),
			Breaches: [...document.querySelectorAll('#breaches li')].map(li => [li.dataset.check, li.textContent.trim(), getComputedStyle(li).backgroundColor]),
			CrossedRows: [...document.querySelectorAll('tr.crossed')].map(tr => tr.cells[0].textContent.trim()),
		},
	};
})()`

// TestDashboardInChromium renders the page in headless Chromium and checks
// that every figure shown matches what the database says, read through the
// queue API directly rather than through the code under test.
func TestDashboardInChromium(t *testing.T) {
	q, dbPath := opstest.Known(t)
	d := ops.NewDashboard(q, func() int64 { return opstest.Now })
	maxDead, maxAge := int64(5), 90*time.Second // the fixture has 6 dead, the oldest 98 s old
	if err := d.SetThresholds(ops.Thresholds{MaxDead: &maxDead, MaxOldestAge: &maxAge,
		MaxRatio: map[queue.Reason]float64{queue.ReasonExhausted: 0.5}}); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(d)
	defer srv.Close()

	bctx := chromiumtest.New(t, 1280, 90*time.Second) // a laptop screen

	if err := chromedp.Do(bctx, chromedp.Navigate(srv.URL+"/"), chromedp.WaitVisible(chromedp.CSS("#dead-list"))); err != nil {
		t.Fatalf("chromium: %v", err)
	}
	got, err := chromedp.Run(bctx, chromedp.Evaluate[shown](readPage))
	if err != nil {
		t.Fatalf("chromium: read the page: %v", err)
	}
	chromiumtest.Screenshot(t, bctx, "dashboard.png")

	// The truth, straight from the queue.
	bg := context.Background()
	st, err := q.Stats(bg)
	if err != nil {
		t.Fatal(err)
	}
	dead, err := q.ListDead(bg, "", queue.AllDead)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"count-total":        strconv.FormatInt(st.Counts[queue.Pending]+st.Counts[queue.Leased]+st.Counts[queue.Done]+st.Counts[queue.Dead], 10),
		"oldest-id":          st.OldestDead.ID,
		"oldest-reason":      string(st.OldestDead.Reason),
		"oldest-age":         ops.HumanDuration(time.Duration(opstest.Now-st.OldestDead.UpdatedAt) * time.Millisecond),
		"investigations":     strconv.FormatInt(st.Investigations, 10),
		"redrives":           strconv.FormatInt(st.Redrives, 10),
		"redriven-done":      strconv.FormatInt(st.Redriven[queue.Done], 10),
		"redriven-dead":      strconv.FormatInt(st.Redriven[queue.Dead], 10),
		"redriven-in-flight": strconv.FormatInt(st.Redriven[queue.Pending]+st.Redriven[queue.Leased], 10),
		"redriven-jobs":      strconv.FormatInt(st.Redriven[queue.Pending]+st.Redriven[queue.Leased]+st.Redriven[queue.Done]+st.Redriven[queue.Dead], 10),
		"last-investigation": time.UnixMilli(st.LastInvestigationMs).UTC().Format("2006-01-02T15:04:05.000Z") +
			" (" + ops.HumanDuration(time.Duration(opstest.Now-st.LastInvestigationMs)*time.Millisecond) + " ago)",
	}
	for _, s := range queue.States() {
		want["count-"+string(s)] = strconv.FormatInt(st.Counts[s], 10)
	}
	for _, r := range queue.Reasons() {
		want["dead-"+string(r)] = strconv.FormatInt(st.DeadByReason[r], 10)
		want["ratio-"+string(r)] = ops.HonestRatio(st.DeadByReason[r], st.Counts[queue.Dead])
	}
	for id, w := range want {
		if g := got.Cells[id]; g != w {
			t.Errorf("#%s shows %q, the database says %q", id, g, w)
		}
	}
	if got, want := len(got.Rows), len(dead); got != want {
		t.Fatalf("dead list shows %d rows, the database has %d dead", got, want)
	}
	for i, j := range dead {
		w := []string{j.ID, string(j.Reason), fmt.Sprintf("%d/%d", j.Attempts, j.MaxAttempts), strconv.FormatInt(j.Token, 10),
			time.UnixMilli(j.UpdatedAt).UTC().Format("2006-01-02T15:04:05.000Z"), ops.HumanDuration(time.Duration(opstest.Now-j.UpdatedAt) * time.Millisecond)}
		// The job's own columns first; the evidence and investigation
		// columns after them are the dashboard test's (ops_test) to judge.
		if len(got.Rows[i]) < len(w) || !slices.Equal(got.Rows[i][:len(w)], w) {
			t.Errorf("dead row %d shows %v, the database says %v", i, got.Rows[i], w)
		}
	}
	// The chart: one bar per reason, drawn in proportion to the counts.
	if got, want := len(got.Bars), len(queue.Reasons()); got != want {
		t.Fatalf("chart has %d bars, want %d", got, want)
	}
	var most int64
	for _, r := range queue.Reasons() {
		most = max(most, st.DeadByReason[r])
	}
	for i, r := range queue.Reasons() {
		b := got.Bars[i]
		if wantW := 300 * float64(st.DeadByReason[r]) / float64(most); b.Reason != string(r) || b.Count != strconv.FormatInt(st.DeadByReason[r], 10) || b.Width != wantW {
			t.Errorf("bar %d: %+v, want %s with %d, %v wide", i, b, r, st.DeadByReason[r], wantW)
		}
	}
	checkLayout(t, got.Layout, dead)
	checkGlance(t, bctx, filepath.Dir(dbPath))
	if got.Resources != 0 {
		t.Errorf("page fetched %d resources, want none", got.Resources)
	}
	if strings.Contains(got.Text, opstest.QtyMarker) {
		t.Error("page shows an order's qty")
	}
}

// checkLayout: the page reads at a glance on a laptop screen. It uses the
// full width; the dead list starts above the fold; each reason has its own
// colour, the same in the chart and the list; and the thresholds crossed
// (6 dead > 5, the oldest 98 s > 90 s; exhausted at 0.5 is not over 0.5)
// are listed first under Attention, highlighted, with their figures.
func checkLayout(t *testing.T, l layout, dead []queue.Job) {
	t.Helper()
	if l.DeadW < 0.9*l.ViewW || l.TopW < 0.9*l.ViewW {
		t.Errorf("layout: expected the page to use the full width (%v px); observed the dead list %v px and the top row %v px wide", l.ViewW, l.DeadW, l.TopW)
	}
	if l.DeadTop >= l.ViewH {
		t.Errorf("layout: expected the dead list above the fold (%v px); observed it starts at %v px", l.ViewH, l.DeadTop)
	}
	fill := map[string]string{}
	for i, r := range queue.Reasons() {
		if i < len(l.BarFill) {
			fill[string(r)] = l.BarFill[i]
		}
	}
	if distinct := len(slices.Compact(slices.Sorted(maps.Values(fill)))); distinct != len(queue.Reasons()) {
		t.Errorf("layout: expected a distinct colour per reason; observed bar fills %v", l.BarFill)
	}
	for i, rr := range l.RowReason {
		if i < len(dead) && (rr[0] != string(dead[i].Reason) || rr[1] != fill[rr[0]]) {
			t.Errorf("dead row %d: expected reason %s drawn in its chart colour %s; observed %v", i, dead[i].Reason, fill[string(dead[i].Reason)], rr)
		}
	}
	var checks []string
	for _, b := range l.Breaches {
		checks = append(checks, b[0])
		if b[2] == "rgba(0, 0, 0, 0)" || b[2] == "rgb(255, 255, 255)" {
			t.Errorf("breach %q is not highlighted (background %s)", b[1], b[2])
		}
	}
	if want := []string{"max_dead", "max_oldest_age"}; !slices.Equal(checks, want) {
		t.Errorf("Attention: expected the crossed thresholds %v listed; observed %v", want, l.Breaches)
	}
	if want := []string{"oldest dead", "dead"}; !slices.Equal(l.CrossedRows, want) {
		t.Errorf("expected the figures past their thresholds highlighted (rows %v); observed %v", want, l.CrossedRows)
	}
}

// checkGlance: at a laptop's and a phone's width the page is no wider than
// the screen, names nothing of where the database lives, and the crossed
// thresholds (Attention) come first, on the first screen, above the dead
// list. It saves dashboard-1280.png and dashboard-400.png.
func checkGlance(t *testing.T, ctx context.Context, dbDir string) {
	t.Helper()
	type where struct {
		Attention float64 `json:"attention"`
		Dead      float64 `json:"dead"`
	}
	for _, width := range chromiumtest.Widths {
		g := chromiumtest.At(t, ctx, width, "dashboard")
		if g.Overflow > 0 {
			t.Errorf("%d px: the page is %.0f px wider than the screen; want nothing wider", width, g.Overflow)
		}
		if strings.Contains(g.HTML, dbDir) {
			t.Errorf("%d px: the page names the database's directory %s", width, dbDir)
		}
		w, err := chromedp.Run(ctx, chromedp.Evaluate[where](`({
			attention: document.querySelector('#breaches').getBoundingClientRect().top + scrollY,
			dead: document.querySelector('#dead-list').getBoundingClientRect().top + scrollY,
		})`))
		if err != nil {
			t.Fatalf("chromium: %d px: %v", width, err)
		}
		if w.Attention >= 900 || w.Attention > w.Dead {
			t.Errorf("%d px: the crossed thresholds at %.0f px, the dead list at %.0f px; want them first, on the first screen (900 px)", width, w.Attention, w.Dead)
		}
	}
}
