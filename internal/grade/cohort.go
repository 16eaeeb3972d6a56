package grade

import (
	"cmp"
	"encoding/csv"
	"fmt"
	"html/template"
	"io"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"snacklab/labsteps"
	"snacklab/labsteps/report"
	"snacklab/labsteps/result"
)

// CohortInfo is what the cohort reports say about the run.
type CohortInfo struct {
	Points Points
	Runs   int
	Shard  Shard
	Cohort int // submissions in the whole cohort
	When   time.Time
	// Roster maps a submission's name to its student (TableOptions.Roster);
	// nil: no roster columns.
	Roster map[string]Student
	// Anonymous: the names are pseudonyms; no links to the submissions.
	Anonymous bool
}

// WriteCohort writes grades.csv, grades.md and grades.html for recs into out.
func WriteCohort(out string, recs []Record, info CohortInfo) error {
	t := newTable(recs, info)
	return joinErr(
		report.WriteFile(filepath.Join(out, "grades.csv"), t.csv),
		report.WriteFile(filepath.Join(out, "grades.md"), t.markdown),
		report.WriteFile(filepath.Join(out, "grades.html"), t.html),
	)
}

func joinErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

// table is the cohort: submission × step.
type table struct {
	Info  CohortInfo
	Steps []labsteps.Step
	Recs  []Record
	Max   float64
}

func newTable(recs []Record, info CohortInfo) table {
	return table{Info: info, Steps: info.Points.Steps(), Recs: recs, Max: info.Points.Max()}
}

// step finds step n of a record (records carry only their graded steps).
func (t table) step(r Record, n int) (StepRecord, bool) {
	for _, s := range r.Steps {
		if s.Num == n {
			return s, true
		}
	}
	return StepRecord{}, false
}

// note says what a reader must know about a row: why it was not graded, or
// which steps were flaky.
func (t table) note(r Record) string {
	if r.Problem != "" {
		return cleanLine(firstLine(r.Problem))
	}
	if r.NotGraded != "" {
		return cleanLine(firstLine(r.NotGraded))
	}
	var parts []string
	for _, s := range r.Flaky() {
		parts = append(parts, fmt.Sprintf("step %d flaky (%d/%d runs)", s.Num, s.Passes, s.Runs))
	}
	return strings.Join(parts, "; ")
}

// failures are a record's failed (or flaky) steps, each with the first
// line of its reason: what grades.html shows in the table itself.
func (t table) failures(r Record) []string {
	var out []string
	for _, s := range r.Steps {
		if st := s.Status(); st == "failed" || st == "flaky" {
			out = append(out, fmt.Sprintf("%d %s: %s", s.Num, s.Slug, result.OneLine(cleanLine(firstLine(s.Reason)), 160)))
		}
	}
	return out
}

// modes says how the records were graded, each mode once.
func (t table) modes() string {
	var ms []string
	for _, r := range t.Recs {
		m := r.Mode
		if m == "" {
			m = "in an unrecorded mode (results written before lab grade recorded it)"
		}
		if !slices.Contains(ms, m) {
			ms = append(ms, m)
		}
	}
	return cleanLine(strings.Join(ms, "; "))
}

// csvSafe keeps a spreadsheet from reading a cell as a formula.
func csvSafe(s string) string {
	if s != "" && strings.ContainsRune("=+-@\t\r", rune(s[0])) {
		return "'" + s
	}
	return s
}

func (t table) csv(w io.Writer) error {
	cw := csv.NewWriter(w)
	head := []string{"submission"}
	if t.Info.Roster != nil {
		head = append(head, "student_id", "name", "email")
	}
	for _, s := range t.Steps {
		head = append(head, s.Name())
	}
	head = append(head, "total", "max", "percent", "status", "note", "mode")
	cw.Write(head)
	for _, r := range t.Recs {
		row := []string{csvSafe(cleanLine(r.Name))}
		if t.Info.Roster != nil {
			st := t.Info.Roster[r.Name]
			row = append(row, csvSafe(cleanLine(st.ID)), csvSafe(cleanLine(st.Name)), csvSafe(cleanLine(st.Email)))
		}
		for _, st := range t.Steps {
			s, _ := t.step(r, st.Num)
			row = append(row, t.cell(r, s))
		}
		status := "graded"
		total, pct := num(r.Score), percent(r.Score, r.Max)
		switch {
		case r.Problem != "":
			status = "not graded"
			if r.Kind == KindModule && r.BuildOut != "" {
				status = "build failed"
			}
		case r.NotGraded != "":
			// No number a spreadsheet could publish as a grade.
			status, total, pct = "not graded", "", ""
		}
		row = append(row, total, num(r.Max), pct, status, csvSafe(t.note(r)), csvSafe(cleanLine(r.Mode)))
		cw.Write(row)
	}
	cw.Flush()
	return cw.Error()
}

// mdCell escapes a Markdown table cell: text from a submission may hold
// HTML, links and table syntax, and none of it is rendered.
func mdCell(s string) string { return mdText(s) }

// cell is a step's points in grades.csv: empty for a step not judged, and
// for every step of a submission not graded (its judged steps' points are
// not a grade either until the rest is judged).
func (t table) cell(r Record, s StepRecord) string {
	if r.NotGraded != "" {
		return ""
	}
	return num(s.Score)
}

func (t table) mark(s StepRecord) string {
	switch s.Status() {
	case result.NotJudgedWord:
		return "? not judged (" + string(s.NotJudged) + ")"
	case "passed":
		return "✓ " + num(s.Score)
	case "flaky":
		return fmt.Sprintf("~ %s (%d/%d)", num(s.Score), s.Passes, s.Runs)
	case "not run":
		return "· 0"
	}
	return "✗ " + num(s.Score) // the parts that passed still score
}

// Summary is the verdict of the cohort in two sentences.
func (t table) Summary() []string {
	n := len(t.Recs)
	full, notGraded, unjudged, flaky := 0, 0, 0, 0
	total, graded := 0.0, 0
	for _, r := range t.Recs {
		if r.NotGraded != "" {
			unjudged++
			continue // no grade: not in the mean, not full marks
		}
		total += r.Score
		graded++
		if r.Problem != "" {
			notGraded++
		}
		if r.Max > 0 && r.Score == r.Max {
			full++
		}
		if len(r.Flaky()) > 0 {
			flaky++
		}
	}
	mean := 0.0
	if graded > 0 {
		mean = total / float64(graded)
	}
	scope := fmt.Sprintf("%d submissions", n)
	if t.Info.Shard.N > 1 {
		scope = fmt.Sprintf("%d of the cohort's %d submissions (shard %s)", n, t.Info.Cohort, t.Info.Shard)
	}
	runs := "each run once"
	if t.Info.Runs > 1 {
		runs = fmt.Sprintf("each run %d times; a step scores only if it passed every run", t.Info.Runs)
	}
	return []string{
		fmt.Sprintf("%s, %s; points %s (max %s).", scope, runs, t.Info.Points, num(t.Max)),
		"Graded " + t.modes() + ", against " + result.ContractText + ".",
		fmt.Sprintf("Mean %s of %s; %d with full marks; %d not graded (missing, not a submission, or the build failed); %d with a flaky step.",
			num(mean), num(t.Max), full, notGraded, flaky) + unjudgedNote(unjudged),
	}
}

// unjudgedNote says how many submissions have no grade because the grader
// could not judge some part: they are left out of the mean, and regraded.
func unjudgedNote(n int) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf(" %d NOT GRADED: some part was not judged (a limit the grader set ran out, the grading was interrupted or the grader erred); they have no score and are left out of the mean: regrade them (lab grade of those submissions).", n)
}

// passRate is how many of the graded (run) submissions passed step n.
func (t table) passRate(n int) (passed, ran int) {
	for _, r := range t.Recs {
		if s, ok := t.step(r, n); ok && s.Runs > 0 {
			ran++
			if s.Status() == "passed" {
				passed++
			}
		}
	}
	return
}

func (t table) markdown(w io.Writer) error {
	var b strings.Builder
	b.WriteString("# snacklab grades\n\n")
	for _, l := range t.Summary() {
		b.WriteString(l + "\n\n") // the grader's own words; the mode is the grader's too
	}
	b.WriteString("✓ passed · ✗ failed · ~ flaky (passed some runs, scores 0) · ? not judged (the grader's trouble: no score until regraded) · · not run\n\n| submission |")
	for _, s := range t.Steps {
		fmt.Fprintf(&b, " %d %s |", s.Num, s.Slug)
	}
	b.WriteString(" total | % | note |\n|---|")
	for range t.Steps {
		b.WriteString("---|")
	}
	b.WriteString("---:|---:|---|\n")
	for _, r := range t.Recs {
		fmt.Fprintf(&b, "| %s |", mdCell(t.who(r)))
		for _, st := range t.Steps {
			s, _ := t.step(r, st.Num)
			fmt.Fprintf(&b, " %s |", t.mark(s))
		}
		total, pct := num(r.Score), percent(r.Score, r.Max)
		if r.NotGraded != "" {
			total, pct = "not graded", ""
		}
		fmt.Fprintf(&b, " %s | %s | %s |\n", total, pct, mdCell(t.note(r)))
	}
	b.WriteString("\n## Steps\n\n| step | points | passed |\n|---|---:|---:|\n")
	for _, s := range t.Steps {
		p, ran := t.passRate(s.Num)
		fmt.Fprintf(&b, "| %d %s — %s | %s | %d of %d |\n", s.Num, s.Slug, mdCell(s.Title), num(t.Info.Points[s.Num]), p, ran)
	}
	var issues []string
	for _, r := range t.Recs {
		if r.Problem != "" {
			src := ""
			if r.Source != "" {
				src = " (" + mdCode(r.Source) + ")"
			}
			issues = append(issues, fmt.Sprintf("- **%s**%s: %s", mdText(r.Name), src, mdCell(firstLine(r.Problem))))
		}
		for _, s := range r.Steps {
			if s.Status() == "failed" || s.Status() == "flaky" {
				line := fmt.Sprintf("- **%s** step %d %s", mdText(r.Name), s.Num, s.Slug)
				if s.Flaky {
					line += fmt.Sprintf(" (flaky, %d of %d runs passed)", s.Passes, s.Runs)
				}
				line += ": " + mdCell(s.Reason)
				if s.Replay != "" {
					line += "  \n  replay: " + mdCode(s.Replay)
				}
				if len(s.Kept) > 0 {
					line += "  \n  kept: " + mdCode(s.Kept[0])
				}
				issues = append(issues, line)
			}
		}
	}
	if len(issues) > 0 {
		b.WriteString("\n## Failures\n\n" + strings.Join(issues, "\n") + "\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// who names a row's submission: with a roster, its student's name and id too.
func (t table) who(r Record) string {
	st, ok := t.Info.Roster[r.Name]
	if !ok {
		return r.Name
	}
	return strings.TrimSpace(fmt.Sprintf("%s — %s %s", r.Name, st.Name, cmp.Or(paren(st.ID), "")))
}

func paren(s string) string {
	if s == "" {
		return ""
	}
	return "(" + s + ")"
}

func (t table) html(w io.Writer) error { return cohortTmpl.Execute(w, t) }

var cohortTmpl = template.Must(template.New("grades").Funcs(template.FuncMap{
	"num":     num,
	"percent": percent,
	"cell": func(t table, r Record, n int) StepRecord {
		s, _ := t.step(r, n)
		return s
	},
	"note":     func(t table, r Record) string { return t.note(r) },
	"failures": func(t table, r Record) []string { return t.failures(r) },
	"rate": func(t table, n int) string {
		p, ran := t.passRate(n)
		return fmt.Sprintf("%d/%d", p, ran)
	},
	"pts":  func(p Points, n int) string { return num(p[n]) },
	"href": func(r Record, f string) string { return r.Name + "/" + f },
	"who":  func(t table, r Record) string { return t.who(r) },
}).Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<title>snacklab grades</title>
<style>
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2rem auto;max-width:1400px;padding:0 1rem;color:#222}
h1{font-size:1.4rem;margin-bottom:.2rem} p.meta{color:#555;margin:.2rem 0;overflow-wrap:anywhere}
table{border-collapse:collapse;margin:1rem 0} div.scroll{overflow-x:auto} /* a wide table scrolls in its box, not the page */
td,th{padding:.3rem .5rem;border:1px solid #ddd;text-align:center;vertical-align:top}
th{background:#f4f4f4;font-weight:600} td.name{text-align:left;white-space:nowrap} td.note{text-align:left;color:#555;max-width:40rem}
td.passed{background:#e6f4ea} td.failed{background:#fce8e6;color:#a50e0e} td.flaky{background:#fef7e0;color:#8a5a00} td.notrun{background:#f1f3f4;color:#777} td.notjudged{background:#e8f0fe;color:#174ea6;font-style:italic}
td.total{font-weight:700} div.why{font-size:12px;color:#a50e0e;white-space:normal;display:-webkit-box;-webkit-line-clamp:2;-webkit-box-orient:vertical;overflow:hidden;overflow-wrap:anywhere} td.num,th small{white-space:nowrap}
.legend span{display:inline-block;padding:0 .4rem;margin-right:.4rem;border-radius:3px}
</style></head><body>
<h1>snacklab grades</h1>
{{range .Summary}}<p class="meta">{{.}}</p>{{end}}
<p class="legend"><span class="" style="background:#e6f4ea">passed</span><span style="background:#fce8e6">failed</span><span style="background:#fef7e0">flaky: passed some runs, scores 0</span><span style="background:#e8f0fe;color:#174ea6;font-style:italic">? not judged: the grader's trouble (a limit it set ran out, interrupted, its own error), no score until regraded</span><span style="background:#f1f3f4">not run</span> · each failed step's reason is in the last column, two lines of it (all of it on hover, and in the submission's report)</p>
<div class="scroll"><table id="grades">
<tr><th>submission</th>{{range .Steps}}<th title="{{.Title}}">{{.Num}}<br>{{.Slug}}<br><small>{{pts $.Info.Points .Num}} pts</small></th>{{end}}<th>total</th><th>%</th><th>note</th></tr>
{{range $r := .Recs}}<tr id="sub-{{$r.Name}}"><td class="name">{{if $.Info.Anonymous}}{{$r.Name}}{{else}}<a href="{{href $r "results.json"}}">{{who $ $r}}</a>{{if not $r.Problem}} · <a href="{{href $r "report.html"}}">report</a>{{end}}{{end}}</td>
{{range $.Steps}}{{$s := cell $ $r .Num}}<td class="{{if eq $s.Status "not run"}}notrun{{else if eq $s.Status "not judged"}}notjudged{{else}}{{$s.Status}}{{end}}" title="{{if $s.Reason}}{{$s.Reason}}{{else}}{{$s.Status}}{{end}}{{if $s.Replay}}&#10;replay: {{$s.Replay}}{{end}}">{{if eq $s.Status "not judged"}}? {{$s.NotJudged}}{{else}}{{num $s.Score}}{{end}}{{if $s.Flaky}}<br><small>{{$s.Passes}}/{{$s.Runs}}</small>{{end}}</td>{{end}}
{{if $r.NotGraded}}<td class="total notjudged">not graded</td><td></td>{{else}}<td class="total">{{num $r.Score}}</td><td>{{percent $r.Score $r.Max}}</td>{{end}}<td class="note">{{with note $ $r}}{{.}}{{end}}{{range failures $ $r}}<div class="why" title="{{.}}">{{.}}</div>{{end}}</td></tr>
{{end}}<tr><th>passed</th>{{range .Steps}}<th>{{rate $ .Num}}</th>{{end}}<th colspan="3"></th></tr>
</table></div>
</body></html>
`))

// percent is score/max as a percentage.
func percent(score, maxScore float64) string {
	if maxScore <= 0 {
		return "0"
	}
	return strconv.FormatFloat(100*score/maxScore, 'f', 1, 64)
}
