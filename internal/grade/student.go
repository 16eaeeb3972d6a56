package grade

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"snacklab/internal/scrub"
)

// What the learner sees of a grading is written for their machine, not the
// grader's: no path of the grading machine, and commands they can run.

// StudentReplay is the command a learner runs to re-run step n on their
// own machine, in their copy of the module.
func StudentReplay(n int) string {
	return fmt.Sprintf("./run-lab.sh %d  (or: lab run --bin DIR %d, DIR holding your queuectl, sender and receiver)", n, n)
}

// replay is the teacher's command that replays step n of a submission the
// way it was graded: isolated again when it was graded isolated (the
// submission's programs never run on the host), else `lab run`.
func (g *grader) replay(rec Record, n int) string {
	if g.cfg.Boundary != nil {
		return fmt.Sprintf("%s grade --out %s --points %d=1 %s", g.cfg.Lab, shellQuote(filepath.Join(os.TempDir(), "replay-"+rec.Name)), n, shellQuote(rec.Source))
	}
	return fmt.Sprintf("%s run --bin %s %d", g.cfg.Lab, shellQuote(rec.Bin), n)
}

// workDirRE matches the path of a step's work dir, on this machine or in
// a grading container (/work/snacklab-step7-1234).
var workDirRE = regexp.MustCompile(`(?:/[^\s'"/:]+)*/snacklab-step\d+-[^\s'"/:]+/?`)

// student rewrites text for the learner's eyes: the paths of the grading
// machine — the step's work dir, the bin dir, the submission's own path,
// the output dir, the grader's temp dir, the container's /sub — become
// relative names, every other path of the grader (an isolate staging dir,
// the engine's, any of them encoded) becomes scrub.Mark, and the line
// pointing at the logs (which stay on the grading machine) goes.
func (g *grader) student(text string, dirs ...string) string {
	var keep []string
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "logs:") {
			continue
		}
		keep = append(keep, l)
	}
	text = strings.Join(keep, "\n")
	text = scrub.New().Relative(append(dirs, g.cfg.Out, g.tmp, "/sub", "/src")...).String(text)
	return workDirRE.ReplaceAllString(text, "")
}
