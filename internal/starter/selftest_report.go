package starter

import (
	"bytes"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// finish fills the verdict and the summary line once every target is graded.
func (rep *SelftestReport) finish(took time.Duration) {
	rep.OK = rep.Reference.OK && rep.Starter.OK
	rejected := 0
	for _, m := range rep.Mutants {
		if m.OK {
			rejected++
		}
		rep.OK = rep.OK && m.OK
	}
	passed := 0
	for _, v := range rep.Variants {
		if v.OK {
			passed++
		}
		rep.OK = rep.OK && v.OK
	}
	rep.TookS = took.Seconds()
	rep.Summary = fmt.Sprintf("selftest: %d/%d mutants rejected, %d/%d variants passed, reference %d/%d, starter %d/%d",
		rejected, len(rep.Mutants), passed, len(rep.Variants), rep.Reference.Passed, len(rep.Reference.Steps), rep.Starter.Passed, len(rep.Starter.Steps))
}

func verdict(o Outcome) string {
	switch {
	case o.Error != "":
		return "ERROR"
	case o.OK:
		return "ok"
	}
	return "NOT AS EXPECTED"
}

// WriteTable prints the report for a person: one row per target and named
// step, what was expected, what happened, and for mutants the other steps
// that also rejected them; then what went wrong, if anything; then the
// summary line.
func (rep *SelftestReport) WriteTable(w io.Writer) error {
	if err := rep.writeGrid(w); err != nil {
		return err
	}
	rep.writeDetails(w)
	if rep.Work != "" {
		fmt.Fprintf(w, "work dir kept: %s\n", rep.Work)
	}
	fmt.Fprintf(w, "took %.1fs\n", rep.TookS)
	_, err := fmt.Fprintln(w, rep.Summary)
	return err
}

// writeGrid writes the table's aligned rows: one per target that failed to
// be graded, one for the reference, the starter and each variant, one per
// named step of each mutant.
func (rep *SelftestReport) writeGrid(w io.Writer) error {
	var table bytes.Buffer
	g := grid{tw: tabwriter.NewWriter(&table, 0, 0, 2, ' ', 0), allSteps: rep.AllSteps}
	g.header()
	for _, o := range rep.all() {
		switch {
		case o.Error != "":
			g.line(o, joinInts(o.Steps), wantOf(o), "ERROR", nil, firstLine(o.Error))
		case o.Kind != KindMutant:
			// The reference and the starter in one row when all is well.
			steps, result := summaryRow(o)
			g.line(o, steps, wantOf(o), result, nil, o.Comment)
		default:
			for i, r := range o.Rows {
				result, what := r.Result, o.Comment
				if !r.OK {
					result = "NOT " + result
				}
				if i > 0 {
					what = ""
				}
				g.line(o, rowStep(r), r.Want, result, o.Also, what)
			}
		}
	}
	if err := g.tw.Flush(); err != nil {
		return err
	}
	return writeTrimmed(w, table.String())
}

// grid is the table's columns; ALSO FAILS only means something when every
// step ran (--all-steps), so it is there only then.
type grid struct {
	tw       *tabwriter.Writer
	allSteps bool
}

func (g grid) header() {
	if g.allSteps {
		fmt.Fprintln(g.tw, "TARGET\tSTEP\tEXPECTED\tRESULT\tALSO FAILS\tWHAT")
	} else {
		fmt.Fprintln(g.tw, "TARGET\tSTEP\tEXPECTED\tRESULT\tWHAT")
	}
}

// line is one row of o; also is a mutant's other failing steps.
func (g grid) line(o Outcome, step, want, result string, also []int, what string) {
	if !g.allSteps {
		fmt.Fprintf(g.tw, "%s\t%s\t%s\t%s\t%s\n", o.Name, step, want, result, what)
		return
	}
	a := "-"
	if len(also) > 0 {
		a = joinInts(also)
	}
	if o.Kind != KindMutant {
		a = ""
	}
	fmt.Fprintf(g.tw, "%s\t%s\t%s\t%s\t%s\t%s\n", o.Name, step, want, result, a, what)
}

// summaryRow is the one row of a target that must pass (or fail) every
// step: the range of its steps, and how many went as expected, naming those
// that did not.
func summaryRow(o Outcome) (steps, result string) {
	var bad []string
	for _, r := range o.Rows {
		if !r.OK {
			bad = append(bad, rowStep(r))
		}
	}
	result = fmt.Sprintf("%d/%d as expected", len(o.Rows)-len(bad), len(o.Rows))
	if o.Runs > 1 {
		result += fmt.Sprintf(" (%d runs)", o.Runs)
	}
	if len(bad) > 0 {
		result += "; NOT: steps " + strings.Join(bad, ",")
	}
	steps = fmt.Sprintf("%d-%d", o.Steps[0], o.Steps[len(o.Steps)-1])
	if len(o.Rows) > len(o.Steps) {
		steps += ",crash"
	}
	return steps, result
}

// writeTrimmed writes the grid without the blanks tabwriter pads its last
// column with.
func writeTrimmed(w io.Writer, table string) error {
	for _, l := range strings.SplitAfter(table, "\n") {
		if _, err := io.WriteString(w, strings.TrimRight(l, " \n")+strings.Repeat("\n", strings.Count(l, "\n"))); err != nil {
			return err
		}
	}
	return nil
}

// writeDetails writes what went wrong: each target's error, and each row
// not as expected with its detail.
func (rep *SelftestReport) writeDetails(w io.Writer) {
	for _, o := range rep.all() {
		if o.Error != "" {
			fmt.Fprintf(w, "\n%s: %s\n", o.Name, o.Error)
		}
		for _, r := range o.Rows {
			if !r.OK && r.Detail != "" {
				fmt.Fprintf(w, "\n%s, step %s: want %s, got %s:\n%s\n", o.Name, rowStep(r), r.Want, r.Result, indentLines(r.Detail, "    "))
			}
		}
	}
}

// all is every outcome, in the order the table lists them.
func (rep *SelftestReport) all() []Outcome {
	return slices.Concat([]Outcome{rep.Reference, rep.Starter}, rep.Mutants, rep.Variants)
}

func wantOf(o Outcome) string {
	switch o.Kind {
	case KindReference, KindVariant:
		return "pass"
	case KindStarter:
		return NotImplemented
	}
	return "reject"
}

func joinInts(ns []int) string {
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ",")
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return s
}

func indentLines(s, prefix string) string {
	return prefix + strings.ReplaceAll(s, "\n", "\n"+prefix)
}

func rowStep(r Row) string {
	if strings.HasPrefix(r.Crash, "power cut") {
		return "powercut"
	}
	if r.Crash != "" {
		return "crash"
	}
	return strconv.Itoa(r.Step)
}
