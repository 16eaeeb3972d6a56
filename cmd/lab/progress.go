package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"snacklab/internal/grade"
	"snacklab/labsteps/fresh"
	"snacklab/labsteps/report"
	"snacklab/labsteps/result"
)

// lastName is the file, in the --bin dir, that keeps a run's results for
// the next run to compare with (--last).
const lastName = "last-results.json"

// readLast is where the last run's results are kept (--last, or
// lastName in the --bin dir; "" for none) and those results (nil when there
// are none yet). A file given with --last that holds something else (a
// Gradescope results.json given by mistake) is refused before anything
// runs, rather than replaced; the default file, the lab's own, is said on
// stderr and replaced.
func readLast(o options, stderr io.Writer) (string, []result.Result, error) {
	path := o.last
	switch path {
	case "none":
		return "", nil, nil
	case "":
		path = filepath.Join(o.bin, lastName)
	}
	f, err := os.Open(path)
	if err != nil {
		if o.last != "" && !errors.Is(err, fs.ErrNotExist) {
			return "", nil, usageErr{fmt.Sprintf("--last %s: %v. Nothing was run", path, err)}
		}
		return path, nil, nil
	}
	defer f.Close()
	rs, err := result.Decode(f)
	if err != nil {
		if o.last != "" {
			if fi, serr := f.Stat(); serr != nil || fi.Size() > 0 {
				return "", nil, usageErr{fmt.Sprintf("--last %s: not the lab's results (%v); give the file a run wrote with --last, or --last none. Nothing was run", path, err)}
			}
			return path, nil, nil
		}
		fmt.Fprintf(stderr, "lab: %s: %v (no progress shown; it is replaced by this run's results)\n", path, err)
		return path, nil, nil
	}
	return path, rs, nil
}

// saveLast replaces the results at path with this run's, keeping the last
// run's results of steps this run did not run (lab run 6 after a full run
// still compares every step next time). A default path that cannot be
// written (a read-only --bin dir) is passed over in silence; one given with
// --last is said on stderr.
func saveLast(path string, last, results []result.Result, given bool, stderr io.Writer) {
	if path == "" || len(results) == 0 {
		return
	}
	merged := slices.Clone(results)
	for _, l := range last {
		if !slices.ContainsFunc(results, func(r result.Result) bool { return r.Step.Num == l.Step.Num }) {
			merged = append(merged, l)
		}
	}
	slices.SortFunc(merged, func(a, b result.Result) int { return a.Step.Num - b.Step.Num })
	err := fresh.Replace(path, 0o644, func(w io.Writer) error { return result.Encode(w, merged) })
	if err != nil && given {
		fmt.Fprintf(stderr, "lab: --last %s: %v\n", path, err)
	}
}

// printSummary prints the run's summary after its step lines: score with
// lab grade's default points, progress, blockers and each other failure
// once with the command that replays it. With -v the steps already told
// their story, so only the score and progress are added.
func printSummary(stdout io.Writer, o options, results []result.Result, last []result.Result) {
	s := report.Summarize(results, grade.DefaultPoints(), report.Scheme{}, last)
	if o.verbose {
		s.Blockers, s.Failures = nil, nil
	}
	fmt.Fprintln(stdout)
	s.Write(stdout, func(step int) string { return replayCommand(o, step) })
}

// replayCommand is the command that runs one step again with its story.
func replayCommand(o options, step int) string {
	self := "lab"
	if len(os.Args) > 0 && os.Args[0] != "" {
		self = os.Args[0]
	}
	args := []string{self, "run", "--bin", o.bin}
	if o.timeout > 0 {
		args = append(args, "--timeout", o.timeout.String())
	}
	return strings.Join(append(args, "-v", fmt.Sprint(step)), " ")
}
