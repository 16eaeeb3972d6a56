package grade_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"snacklab/internal/chromiumtest"
	"snacklab/internal/grade"
)

// grades.html, opened in headless Chromium at a laptop's and a phone's
// width, reads at a glance: the page is no wider than the screen (the table
// scrolls in its own box), nothing of the grader's paths (sources, work
// dirs, executables) shows, and the summary that counts the submissions not
// graded comes first, on the first screen, above the table. With
// SNACKLAB_SCREENSHOT_DIR set it saves grades-1280.png and grades-400.png.
func TestGradesReadAtAGlance(t *testing.T) {
	ctx := chromiumtest.New(t, 1280, 2*time.Minute)
	root := t.TempDir()
	out := filepath.Join(root, "out")
	points := grade.DefaultPoints()
	var steps []grade.StepRecord
	for _, s := range points.Steps() {
		steps = append(steps, grade.StepRecord{Num: s.Num, Slug: s.Slug, Title: s.Title, Points: points[s.Num], Score: points[s.Num], Passes: 1, Runs: 1})
	}
	with := func(f func(s *grade.StepRecord)) []grade.StepRecord {
		c := append([]grade.StepRecord(nil), steps...)
		f(&c[1])
		return c
	}
	rec := func(name string, st []grade.StepRecord, notGraded string) grade.Record {
		r := grade.Record{Name: name, Source: filepath.Join(root, "submissions", name), Kind: grade.KindModule, NotGraded: notGraded,
			Bin: filepath.Join(root, "bin", name), Runs: 1, Mode: "unisolated", Max: points.Max(), Steps: st}
		for _, s := range st {
			r.Score += s.Score
		}
		return r
	}
	recs := []grade.Record{
		rec("ann", steps, ""),
		rec("bob", with(func(s *grade.StepRecord) {
			s.Passes, s.Wrong, s.Score = 0, 1, 0
			s.Reason = "enqueue of a duplicate id exited 0, want exit 2 (CONTRACT.md §2.1)"
			s.Replay = "lab run 2 --bin BIN"
			s.Kept = []string{filepath.Join(root, "out", "bob", "work", "step2")}
		}), ""),
		rec("cat", with(func(s *grade.StepRecord) { s.Passes, s.NotJudged, s.Score = 0, "TIMEOUT", 0 }),
			"step 2 was not judged: TIMEOUT (the grader's limit ran out)"),
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := grade.WriteCohort(out, recs, grade.CohortInfo{Points: points, Runs: 1, Shard: grade.Shard{I: 0, N: 1}, Cohort: 3, When: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.Navigate("file://"+filepath.Join(out, "grades.html")), chromedp.WaitVisible(chromedp.CSS("#grades"))); err != nil {
		t.Fatalf("chromium: open grades.html: %v", err)
	}
	type where struct {
		Summary string  `json:"summary"`
		Top     float64 `json:"top"`
		Table   float64 `json:"table"`
	}
	for _, width := range chromiumtest.Widths {
		g := chromiumtest.At(t, ctx, width, "grades")
		if g.Overflow > 0 {
			t.Errorf("%d px: the page is %.0f px wider than the screen; want nothing wider", width, g.Overflow)
		}
		if strings.Contains(g.HTML, root) {
			t.Errorf("%d px: the page names the grader's directory %s", width, root)
		}
		w, err := chromedp.Run(ctx, chromedp.Evaluate[where](`(() => {
			const p = [...document.querySelectorAll('p.meta')].find(p => /NOT GRADED/.test(p.textContent));
			return {
				summary: p ? p.textContent : '',
				top: p ? p.getBoundingClientRect().top + scrollY : -1,
				table: document.querySelector('#grades').getBoundingClientRect().top + scrollY,
			};
		})()`))
		if err != nil {
			t.Fatalf("chromium: %d px: %v", width, err)
		}
		if !strings.Contains(w.Summary, "1 NOT GRADED") || w.Top < 0 || w.Top >= 900 || w.Top > w.Table {
			t.Errorf("%d px: the not-graded summary %q at %.0f px, the table at %.0f px; want 1 NOT GRADED first, on the first screen (900 px)", width, w.Summary, w.Top, w.Table)
		}
		for _, want := range []string{"? TIMEOUT", "enqueue of a duplicate id exited 0"} {
			if !strings.Contains(g.HTML, want) {
				t.Errorf("%d px: grades.html lacks %q", width, want)
			}
		}
	}
}
