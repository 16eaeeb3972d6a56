package grade

import (
	"fmt"
	"strings"

	"snacklab/labsteps/result"
)

// The grader's progress: a line per graded submission on Config.Log, and
// the flaky steps' replays under it.

func (g *grader) logf(format string, args ...any) {
	g.logMu.Lock()
	defer g.logMu.Unlock()
	fmt.Fprintf(g.cfg.Log, format, args...)
}

func (g *grader) logRecord(r Record) {
	pct := 0.0
	if r.Max > 0 {
		pct = 100 * r.Score / r.Max
	}
	r = cleanRecord(r)
	line := fmt.Sprintf("%7s/%-4s %5.1f%%  %-24s", num(r.Score), num(r.Max), pct, r.Name)
	if r.NotGraded != "" {
		// Its points are no grade: say so where the score would be.
		line = fmt.Sprintf("%-19s %-24s  %s", "  NOT GRADED", r.Name, result.OneLine(firstLine(r.NotGraded), 300))
	} else if r.Problem != "" {
		line += "  " + result.OneLine(firstLine(r.Problem), 200)
	} else {
		line += fmt.Sprintf("  %d/%d steps", r.Passed(), len(r.Steps))
		var failed []string
		for _, s := range r.Steps {
			if st := s.Status(); st != "passed" {
				f := fmt.Sprintf("%d %s", s.Num, st)
				if n := passedParts(s); len(s.Parts) > 0 && s.Runs > 0 {
					f += fmt.Sprintf(" %d/%d parts", n, len(s.Parts))
				}
				failed = append(failed, f)
			}
		}
		if len(failed) > 0 {
			line += " (" + strings.Join(failed, ", ") + ")"
		}
	}
	line += fmt.Sprintf("  %.1fs\n", r.Took)
	for _, f := range r.Flaky() {
		line += fmt.Sprintf("        flaky: step %d %s passed %d of %d runs; replay: %s", f.Num, f.Slug, f.Passes, f.Runs, f.Replay)
		if len(f.Kept) > 0 {
			line += "  (failing run kept in " + f.Kept[0] + ")"
		}
		line += "\n"
	}
	g.logf("%s", line)
}

// passedParts counts the parts of a step that passed every run.
func passedParts(s StepRecord) int {
	n := 0
	for _, p := range s.Parts {
		if p.Status() == "passed" {
			n++
		}
	}
	return n
}
