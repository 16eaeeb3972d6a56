package ops_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"snacklab/internal/ops"
	"snacklab/internal/ops/opstest"
	"snacklab/queue"
)

// chromiumPath finds a headless-capable Chromium. Without one the browser
// test skips, unless SNACKLAB_REQUIRE_CHROMIUM=1 (CI), where it must run.
func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	const how = "no chromium on PATH (Debian: apt-get install -y chromium)"
	if os.Getenv("SNACKLAB_REQUIRE_CHROMIUM") == "1" {
		t.Fatal(how + ", and SNACKLAB_REQUIRE_CHROMIUM=1 requires it")
	}
	t.Skip(how + "; set SNACKLAB_REQUIRE_CHROMIUM=1 to fail instead of skipping")
	return ""
}

// shown is what the page displays, read by the browser after rendering.
type shown struct {
	Cells     map[string]string `json:"cells"`
	Rows      [][]string        `json:"rows"`
	Bars      []bar             `json:"bars"`
	Text      string            `json:"text"`
	Resources int               `json:"resources"`
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
	};
})()`

// TestDashboardInChromium renders the page in headless Chromium and checks
// that every figure shown matches what the database says, read through the
// queue API directly rather than through the code under test.
func TestDashboardInChromium(t *testing.T) {
	exe := chromiumPath(t)
	q, _ := opstest.Known(t)
	srv := httptest.NewServer(ops.NewDashboard(q, func() int64 { return opstest.Now }))
	defer srv.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	opts := append(slices.Clone(chromedp.DefaultExecAllocatorOptions[:]),
		chromedp.ExecPath(exe), chromedp.NoSandbox, chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("disable-dev-shm-usage", true), chromedp.WindowSize(1000, 1400))
	actx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(actx)
	defer cancelBrowser()

	if err := chromedp.Do(bctx, chromedp.Navigate(srv.URL+"/"), chromedp.WaitVisible(chromedp.CSS("#dead-list"))); err != nil {
		t.Fatalf("chromium: %v", err)
	}
	got, err := chromedp.Run(bctx, chromedp.Evaluate[shown](readPage))
	if err != nil {
		t.Fatalf("chromium: read the page: %v", err)
	}
	png, err := chromedp.Run(bctx, chromedp.FullScreenshot(90))
	if err != nil {
		t.Fatalf("chromium: screenshot: %v", err)
	}
	if dir := os.Getenv("SNACKLAB_SCREENSHOT_DIR"); dir != "" {
		if err := os.WriteFile(filepath.Join(dir, "dashboard.jpg"), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}

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
		"oldest-age":         (time.Duration(opstest.Now-st.OldestDead.UpdatedAt) * time.Millisecond).String(),
		"investigations":     strconv.FormatInt(st.Investigations, 10),
		"redrives":           strconv.FormatInt(st.Redrives, 10),
		"redriven-done":      strconv.FormatInt(st.Redriven[queue.Done], 10),
		"redriven-dead":      strconv.FormatInt(st.Redriven[queue.Dead], 10),
		"redriven-in-flight": strconv.FormatInt(st.Redriven[queue.Pending]+st.Redriven[queue.Leased], 10),
		"redriven-jobs":      strconv.FormatInt(st.Redriven[queue.Pending]+st.Redriven[queue.Leased]+st.Redriven[queue.Done]+st.Redriven[queue.Dead], 10),
		"last-investigation": time.UnixMilli(st.LastInvestigationMs).UTC().Format("2006-01-02T15:04:05.000Z") +
			" (" + (time.Duration(opstest.Now-st.LastInvestigationMs) * time.Millisecond).String() + " ago)",
	}
	for _, s := range queue.States() {
		want["count-"+string(s)] = strconv.FormatInt(st.Counts[s], 10)
	}
	for _, r := range queue.Reasons() {
		want["dead-"+string(r)] = strconv.FormatInt(st.DeadByReason[r], 10)
		want["ratio-"+string(r)] = fmt.Sprintf("%.1f%%", 100*float64(st.DeadByReason[r])/float64(st.Counts[queue.Dead]))
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
			time.UnixMilli(j.UpdatedAt).UTC().Format("2006-01-02T15:04:05.000Z"), (time.Duration(opstest.Now-j.UpdatedAt) * time.Millisecond).String()}
		if !slices.Equal(got.Rows[i], w) {
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
	if got.Resources != 0 {
		t.Errorf("page fetched %d resources, want none", got.Resources)
	}
	if strings.Contains(got.Text, opstest.QtyMarker) {
		t.Error("page shows an order's qty")
	}
}
