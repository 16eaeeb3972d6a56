package report

import (
	"fmt"
	"html/template"
	"io"
	"strings"
	"time"

	"snacklab/labsteps/result"
)

// HTMLReport is what WriteHTML renders.
type HTMLReport struct {
	// Title is the page's heading: short ("snacklab lab report",
	// "snacklab grade: ann"); how it was graded goes in Mode.
	Title string
	// Bin is the executables' directory, shown in the footer only; a
	// grader leaves it "" (its paths are not the student's business).
	Bin string
	// Mode says how the run was isolated, in the footer.
	Mode    string
	When    time.Time
	Took    time.Duration
	Results []result.Result
	// Points per step (1 when not given) and the Scheme that splits them:
	// the score the page leads with.
	Points map[int]float64
	Scheme Scheme
}

// explainOnce is a failed check with each fact once (the console's ✗ line
// repeats expected and observed): what was checked, then part, clause,
// expected, observed and why.
func explainOnce(c result.Check) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n", c.What)
	if c.TimedOut {
		b.WriteString("  (a wait ran out: not a wrong answer)\n")
	}
	if len(c.Clause) > 0 {
		fmt.Fprintf(&b, "  clause:   %s\n", strings.Join(c.Clause, " "))
	}
	fmt.Fprintf(&b, "  expected: %s\n  observed: %s\n  why:      %s\n", c.Expected, c.Observed, c.Why)
	return b.String()
}

// htmlView is what the template reads: the report, and its summary.
type htmlView struct {
	HTMLReport
	Sum                    Summary
	Score, Max             float64
	Parts, PartsPass, NotJ int
	StepsPass              int
}

// WriteHTML writes a self-contained page (inline CSS and SVG, no scripts, no
// network) that reads in ten seconds: the score, then the failures (what
// blocks many parts once, then each other failure in full), then a table
// of every step's and part's mark (✓, ✗, and not judged in its own
// colour), then each step folded (a failed one open) with the timeline of
// step 8's crash story and of any failed step.
func WriteHTML(w io.Writer, rep HTMLReport) error {
	v := htmlView{HTMLReport: rep, Sum: Summarize(rep.Results, rep.Points, rep.Scheme, nil)}
	for _, ps := range v.Sum.Scores {
		for _, p := range ps {
			v.Parts++
			v.Max += p.Points
			v.Score += p.Score
			switch p.Status() {
			case "passed":
				v.PartsPass++
			case result.NotJudgedWord:
				v.NotJ++
			}
		}
	}
	v.Score, v.Max = Round(v.Score), Round(v.Max)
	for _, r := range rep.Results {
		if r.Pass {
			v.StepsPass++
		}
	}
	return htmlTmpl.Execute(w, v)
}

var htmlTmpl = template.Must(template.New("report").Funcs(template.FuncMap{
	"secs": func(d time.Duration) string { return fmt.Sprintf("%.2f s", d.Seconds()) },
	// code shows `x` as <code>x</code>, escaping everything else.
	"code": func(s string) template.HTML {
		parts := strings.Split(s, "`")
		var b strings.Builder
		for i, p := range parts {
			if i%2 == 1 && i < len(parts)-1 {
				b.WriteString("<code>" + template.HTMLEscapeString(p) + "</code>")
			} else {
				if i%2 == 1 {
					b.WriteString("`")
				}
				b.WriteString(template.HTMLEscapeString(p))
			}
		}
		return template.HTML(b.String())
	},
	"timelines": Timelines,
	"num":       num,
	"mark":      Mark,
	"compact":   compactParts,
	"vclass": func(v result.Verdict) string {
		if v.Judged() {
			return string(v)
		}
		return "NJ"
	},
	"partID": func(f Failure) string { return strings.TrimSpace(fmt.Sprintf("%d %s", f.Step.Num, f.Part.ID)) },
	"once":   explainOnce,
	"pname": func(p result.PartOutcome) string {
		if _, rest, ok := strings.Cut(p.Name, ": "); ok && result.PartID(p.Name, -1) == p.ID {
			return rest
		}
		return p.Name
	},
	"contract": func() string { return result.ContractText },
	"passed": func(rs []result.Result) int {
		n := 0
		for _, r := range rs {
			if r.Pass {
				n++
			}
		}
		return n
	},
}).Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Title}}</title>
<style>
body{font:15px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:1.5rem auto;max-width:1200px;padding:0 1rem;color:#222}
h1{font-size:1.4rem;margin:0 0 .3rem} h2{font-size:1.15rem;margin:1.6rem 0 .5rem}
.score{font-size:1.15rem;margin:.2rem 0} .meta{color:#666;margin:.2rem 0;font-size:.9em}
table.steps{border-collapse:collapse;width:100%;margin:.6rem 0}
table.steps td,table.steps th{padding:.35rem .5rem;border-bottom:1px solid #ddd;vertical-align:top;text-align:left}
td.num,.nowrap{white-space:nowrap}
.PASS,.FAIL,.NJ{color:#fff;border-radius:4px;padding:.05rem .4rem;font-weight:bold;white-space:nowrap}
.PASS{background:#2e7d32} .FAIL{background:#c62828} .NJ{background:#5e35b1}
.part{display:inline-block;margin:0 .35rem .15rem 0;font-family:ui-monospace,Menlo,Consolas,monospace;white-space:nowrap}
.part.PASS,.part.FAIL,.part.NJ{padding:0 .3rem;font-weight:normal}
.legend{font-size:.85em;color:#555}
.why{color:#555;font-size:.9em}
.fail{background:#fff3f3;border-left:4px solid #c62828;padding:.5rem .8rem;margin:.4rem 0;white-space:pre-wrap;overflow-wrap:anywhere;font-family:ui-monospace,Menlo,Consolas,monospace;font-size:.85em}
.blocked{background:#fff8e1;border-left:4px solid #c62828;padding:.5rem .8rem;margin:.4rem 0}
.blocked .cause{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:.85em;overflow-wrap:anywhere}
section.step{margin:1.5rem 0} .tl{overflow-x:auto;border:1px solid #ddd;border-radius:6px;margin:.5rem 0 1.2rem}
h3{margin:.8rem 0 .2rem;font-size:1rem}
details{margin:.3rem 0} details>summary{cursor:pointer}
details pre{white-space:pre-wrap;font-size:.8em;background:#fafafa;padding:.6rem;border:1px solid #eee}
footer{margin-top:2rem;border-top:1px solid #ddd;padding-top:.5rem}
</style></head><body>
<h1>{{.Title}}</h1>
<p class="score" id="score"><b>{{num .Score}} of {{num .Max}} points</b> · {{.PartsPass}} of {{.Parts}} parts pass · {{.StepsPass}} of {{len .Results}} steps passed{{if .NotJ}} · <span class="NJ">{{.NotJ}} not judged</span>{{end}}</p>
<p class="meta">graded against {{contract}} · {{secs .Took}}{{if not .When.IsZero}} · {{.When.Format "2006-01-02 15:04 MST"}}{{end}}</p>
{{if .NotJ}}<p class="legend">Not judged: the lab could not judge the part (a wait ran out, the run was interrupted, or the lab erred): it is not a wrong answer, scores nothing and counts for nothing until it is judged again.</p>{{end}}
{{if or .Sum.Blockers .Sum.Failures}}<section id="failures"><h2>Failures</h2>
{{range .Sum.Blockers}}<div class="blocked"><b>blocked by: {{.Label}}</b> — first in step {{.First}}
<div class="cause">✗ {{.Check.Cause}}</div>
<div>blocks {{len .Parts}} part(s): {{compact .Parts}}</div></div>
{{end}}{{range .Sum.Failures}}<div class="fail"><b>✗ {{partID .}}</b>{{if .Part.Name}} · {{pname .Part}}{{end}}
{{range .Checks}}{{once .}}{{end}}</div>
{{end}}</section>{{end}}
<h2>Steps</h2>
<p class="legend"><span class="part PASS">✓</span> passed <span class="part FAIL">✗</span> failed <span class="part NJ">○</span> not judged</p>
<table class="steps" id="steps">
<tr><th></th><th>step</th><th>parts</th><th>time</th></tr>
{{range .Results}}<tr id="step-{{.Step.Num}}">
<td><span class="{{vclass .Verdict}}">{{.Verdict}}</span></td>
<td class="num"><b>{{.Step.Num}}</b>&nbsp;{{.Step.Slug}}</td>
<td>{{range .PartOutcomes}}{{if .ID}}<span class="part {{vclass .Verdict}}" title="{{.Name}}">{{.ID}}{{mark .Verdict}}</span>{{end}}{{end}}</td>
<td class="num">{{secs .Took}}</td></tr>
{{end}}</table>
{{range .Results}}<details class="stepinfo" id="about-step{{.Step.Num}}"><summary><span class="{{vclass .Verdict}}">{{.Verdict}}</span> <b>{{.Step.Num}} {{.Step.Slug}}</b>: {{.Step.Title}}</summary>
{{if not .Pass}}<div class="fail">{{.Detail}}</div>{{end}}
<p>{{code .Step.Checks}}<br><span class="why">Why: {{code .Step.Why}}</span></p></details>
{{end}}
{{range .Results}}{{if or (eq .Step.Num 8) (not .Pass)}}
<section class="step" id="timelines-step{{.Step.Num}}">
<h2>Step {{.Step.Num}}: {{.Step.Title}} — timeline</h2>
<p class="why">Top to bottom in real time; one column per process. A red arrow is a kill, a cross a crash exit; red is a refusal or a failure. <i>t=</i> is the injected clock the event ran under; a zigzag break marks the clock moving on (or, on the real clock, time passing); <i>@N ms</i> is a real-clock instant, on the real-time column's scale. The green line says what the story came to.</p>
{{range timelines .}}<h3>{{.Title}}</h3><div class="tl">{{.SVG}}</div>{{end}}
<details><summary>the story, as the harness told it</summary><pre>{{.Narrative}}</pre></details>
</section>{{end}}{{end}}
<footer class="meta">{{if .Bin}}executables: <code>{{.Bin}}</code>{{end}}{{if .Mode}}{{if .Bin}} · {{end}}{{.Mode}}{{end}}</footer>
</body></html>
`))
