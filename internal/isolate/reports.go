package isolate

import (
	"fmt"
	"io"
	"path/filepath"

	"snacklab/internal/grade"
	"snacklab/internal/scrub"
	"snacklab/labsteps/report"
	"snacklab/labsteps/result"
)

// The reports of an isolated run: results.json and junit.xml, made from the
// outcome with report's writers, and scrubbed of the grading machine's
// paths.

// writeReports writes results.json and junit.xml into dir with report's
// writers, every text a submission could have produced cleaned of control
// characters first.
func writeReports(dir string, o Outcome) (results, junit string, err error) {
	results, junit = filepath.Join(dir, "results.json"), filepath.Join(dir, "junit.xml")
	if err := report.WriteFile(results, func(w io.Writer) error { return WriteGradescope(w, o) }); err != nil {
		return "", "", err
	}
	if err := report.WriteFile(junit, func(w io.Writer) error { return WriteJUnit(w, o) }); err != nil {
		return results, "", err
	}
	return results, junit, nil
}

// cleanResults are the outcome's results, every text made plain.
func (o Outcome) cleanResults() []result.Result {
	rs := o.LabResults()
	for i := range rs {
		rs[i] = grade.CleanResult(rs[i])
	}
	return rs
}

// summary is the top-level output line of the reports.
func (o Outcome) summary() string {
	s := fmt.Sprintf("%d of %d lab steps passed (graded in an isolated container: no network, read-only, %d MiB, %d pids, %g CPU, wall-clock limit %v).",
		o.Passed, len(o.Steps), o.Limits.Memory>>20, o.Limits.PIDs, o.Limits.CPUs, o.Limits.Wall)
	if o.Problem != "" {
		s += " " + o.Problem
	} else if o.OOMKilled {
		s += fmt.Sprintf(" A process of the submission was killed at the memory limit of %d MiB.", o.Limits.Memory>>20)
	}
	return s
}

// WriteGradescope writes the outcome as Gradescope's results.json with
// report's writer, as `lab run --results` does: one point per step, split
// among its parts, the summary on top.
func WriteGradescope(w io.Writer, o Outcome) error {
	g := report.GradescopeOf(o.cleanResults(), o.Took, report.Scheme{}, nil)
	g.Output = grade.Clean(o.summary()) + "\n" + g.Output
	return report.EncodeGradescope(w, g)
}

// WriteJUnit writes the outcome as JUnit XML with report's writer: one
// testcase per part, the summary as the suite's system-out.
func WriteJUnit(w io.Writer, o Outcome) error {
	s := report.JUnitOf(o.cleanResults(), o.Took)
	s.SystemOut = grade.Clean(o.summary())
	return report.EncodeJUnit(w, s)
}

// scrub takes the grading machine's paths out of everything a student
// sees: the staging directory and the other host paths given (the mount
// sources a program can read in /proc/self/mountinfo), the engine's, and
// any of them encoded. Every string of the outcome passes, the lab's full
// report (Reported: every check's observed text, every event) included,
// not only the fields a student reads today.
func (o *Outcome) scrub(hostPaths ...string) {
	requested := o.requested
	if err := scrub.New(hostPaths...).JSON(o); err != nil {
		// An outcome is plain data; failing to encode it is a bug, and
		// nothing unscrubbed may go out.
		*o = Outcome{Name: o.Name, Limits: o.Limits, NotGraded: true, Problem: "the grader could not clean its report: " + err.Error()}
	}
	o.requested = requested
}
