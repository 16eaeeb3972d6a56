package main_test

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"snacklab/internal/chromiumtest"
)

// Step 8's timeline, rendered in headless Chromium, reads at a glance: A's
// late token-1 finish is drawn in A's column, the kill is an arrow from the
// harness to A, the lease's wait is a marked break between A's crash and B's
// reclaim, a closing line sums the story up, and the real-clock variant
// shows no raw epoch milliseconds. With SNACKLAB_SCREENSHOT_DIR set it saves
// timeline.png there.
func TestStep8TimelineReadsAtAGlance(t *testing.T) {
	t.Parallel()
	html := filepath.Join(t.TempDir(), "report.html")
	if r := lab(t, "run", "crash", "--html", html); r.code != 0 { // step 8 by name; `lab crash` alone is the crash enumeration
		t.Fatalf("lab run crash: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	ctx := chromiumtest.New(t, 1300, 3*time.Minute) // a loaded CI machine starts Chromium slowly; the page itself is static
	type section struct {
		Title     string             `json:"title"`
		LaneX     map[string]float64 `json:"laneX"`
		LateX     float64            `json:"lateX"`     // the mark on the late finish's row
		Kills     [][]any            `json:"kills"`     // target, x1, x2
		KillCross int                `json:"killCross"` // kills still drawn as a cross
		BreakY    []float64          `json:"breakY"`
		CrashY    float64            `json:"crashY"`   // A's exit or kill row
		ReclaimY  float64            `json:"reclaimY"` // B claims with token 2
		Summary   string             `json:"summary"`
		Text      string             `json:"text"`
	}
	if err := chromedp.Do(ctx, chromedp.Navigate("file://"+html), chromedp.WaitVisible(chromedp.CSS("#timelines-step8 svg.timeline"))); err != nil {
		t.Fatalf("chromium: open the report: %v", err)
	}
	got, err := chromedp.Run(ctx, chromedp.Evaluate[[]section](`[...document.querySelectorAll('#timelines-step8 svg.timeline')].map(svg => {
		const top = svg.getBoundingClientRect().top;
		const texts = [...svg.querySelectorAll('text')];
		const laneX = {};
		for (const t of svg.querySelectorAll('text.lane')) if (t.getAttribute('text-anchor') === 'middle') laneX[t.textContent] = +t.getAttribute('x');
		const rowY = re => { const t = texts.find(t => re.test(t.textContent)); return t ? t.getBoundingClientRect().top - top : -1; };
		const late = texts.find(t => /late finish/.test(t.textContent));
		let lateX = -1;
		if (late) {
			const y = +late.getAttribute('y') - 4;
			const m = [...svg.querySelectorAll('circle')].find(c => Math.abs(+c.getAttribute('cy') - y) < 1);
			if (m) lateX = +m.getAttribute('cx');
		}
		return {
			title: svg.closest('.tl').previousElementSibling.textContent,
			laneX, lateX,
			kills: [...svg.querySelectorAll('line[data-kind=kill]')].map(l => [l.dataset.target, +l.getAttribute('x1'), +l.getAttribute('x2')]),
			killCross: svg.querySelectorAll('path[data-kind=kill]').length,
			breakY: [...svg.querySelectorAll('g.break')].map(g => g.getBoundingClientRect().top - top),
			crashY: rowY(/^A: (exit 73|killed)/),
			reclaimY: rowY(/^B: claimed o-\d token 2/),
			summary: [...svg.querySelectorAll('g.summary')].map(g => g.textContent).join(' | '),
			text: svg.textContent,
		};
	})`))
	if err != nil {
		t.Fatalf("chromium: read the report: %v", err)
	}
	chromiumtest.Screenshot(t, ctx, "timeline.png")
	if len(got) != 3 {
		t.Fatalf("expected 3 timelines (a, b, c); observed %d", len(got))
	}
	epoch := regexp.MustCompile(`\b1\d{12}\b`)
	for i, s := range got {
		if s.LateX != s.LaneX["A"] {
			t.Errorf("%s: expected A's late token-1 finish drawn in A's column (x=%v); observed its mark at x=%v", s.Title, s.LaneX["A"], s.LateX)
		}
		for _, w := range []string{"stock +7 once for 2 requests", "done under token 2", "late token 1 refused"} {
			if !strings.Contains(s.Summary, w) {
				t.Errorf("%s: expected a closing line with %q; observed %q", s.Title, w, s.Summary)
			}
		}
		wantBreaks := 1
		if i == 2 && !strings.Contains(s.Text, "harness: wait until") {
			wantBreaks = 0 // on a slow machine A's real lease ran out while B ran: nobody waited
		}
		if len(s.BreakY) != wantBreaks || wantBreaks == 1 && (s.BreakY[0] < s.CrashY || s.BreakY[0] > s.ReclaimY) {
			t.Errorf("%s: expected one marked break between A's crash (y=%v) and B's reclaim (y=%v); observed breaks at %v", s.Title, s.CrashY, s.ReclaimY, s.BreakY)
		}
		if i == 1 {
			if len(s.Kills) != 1 || s.Kills[0][0] != "A" || s.Kills[0][1] != s.LaneX["harness"] || abs(s.Kills[0][2].(float64)-s.LaneX["A"]) > 10 || s.KillCross != 0 {
				t.Errorf("%s: expected the SIGKILL as one arrow from the harness (x=%v) to A (x=%v) and no cross; observed %v, %d crosses", s.Title, s.LaneX["harness"], s.LaneX["A"], s.Kills, s.KillCross)
			}
		}
		if i == 2 {
			if m := epoch.FindString(s.Text); m != "" {
				t.Errorf("%s: expected real-clock instants relative to the step's start; observed raw epoch ms %s", s.Title, m)
			}
			if !strings.Contains(s.Text, "lease_until @") {
				t.Errorf("%s: expected lease_until shown as @N ms; observed %q", s.Title, s.Text)
			}
		}
	}
}

func abs(x float64) float64 { return max(x, -x) }
