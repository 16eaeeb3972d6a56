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
	Title   string
	Bin     string
	When    time.Time
	Took    time.Duration
	Results []result.Result
}

// WriteHTML writes a self-contained page (inline CSS and SVG, no scripts, no
// network): the verdict of each step, its failure explained, and the timeline
// of step 8's crash story (and of any failed step).
func WriteHTML(w io.Writer, rep HTMLReport) error {
	return htmlTmpl.Execute(w, rep)
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
	"contract":  func() string { return result.ContractText },
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
<title>{{.Title}}</title>
<style>
body{font:15px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2rem auto;max-width:1200px;padding:0 1rem;color:#222}
h1{font-size:1.5rem;margin-bottom:.2rem} .meta{color:#666;margin-top:0}
table.steps{border-collapse:collapse;width:100%;margin:1rem 0}
table.steps td,table.steps th{padding:.45rem .6rem;border-bottom:1px solid #ddd;vertical-align:top;text-align:left}
.PASS{color:#fff;background:#2e7d32;border-radius:4px;padding:.1rem .45rem;font-weight:bold}
.FAIL{color:#fff;background:#c62828;border-radius:4px;padding:.1rem .45rem;font-weight:bold}
.TIMEOUT{color:#fff;background:#b35c00;border-radius:4px;padding:.1rem .45rem;font-weight:bold}
.why{color:#555;font-size:.9em}
.fail{background:#fff3f3;border-left:4px solid #c62828;padding:.5rem .8rem;margin:.4rem 0;white-space:pre-wrap;font-family:ui-monospace,Menlo,Consolas,monospace;font-size:.85em}
section.step{margin:2rem 0} .tl{overflow-x:auto;border:1px solid #ddd;border-radius:6px;margin:.5rem 0 1.2rem}
h3{margin:.8rem 0 .2rem;font-size:1rem}
details pre{white-space:pre-wrap;font-size:.8em;background:#fafafa;padding:.6rem;border:1px solid #eee}
</style></head><body>
<h1>{{.Title}}</h1>
<p class="meta">{{passed .Results}} of {{len .Results}} steps passed in {{secs .Took}} · graded against {{contract}} · executables: <code>{{.Bin}}</code> · {{.When.Format "2006-01-02 15:04:05 MST"}}</p>
<table class="steps" id="steps">
<tr><th></th><th>step</th><th>what it checks · why it matters</th><th>time</th></tr>
{{range .Results}}<tr id="step-{{.Step.Num}}">
<td><span class="{{.Verdict}}">{{.Verdict}}</span></td>
<td><b>{{.Step.Num}}</b>&nbsp;{{.Step.Slug}}</td>
<td><b>{{.Step.Title}}</b>{{if not .Pass}}<div class="fail">{{.Detail}}</div>{{end}}
{{code .Step.Checks}}<br><span class="why">Why: {{code .Step.Why}}</span></td>
<td>{{secs .Took}}</td></tr>
{{end}}</table>
{{range .Results}}{{if or (eq .Step.Num 8) (not .Pass)}}
<section class="step" id="timelines-step{{.Step.Num}}">
<h2>Step {{.Step.Num}}: {{.Step.Title}} — timeline</h2>
<p class="why">Top to bottom in real time; one column per process. A red arrow is a kill, a cross a crash exit; red is a refusal or a failure. <i>t=</i> is the injected clock the event ran under; a zigzag break marks the clock moving on (or, on the real clock, time passing); <i>@N ms</i> is a real-clock instant, on the real-time column's scale. The green line says what the story came to.</p>
{{range timelines .}}<h3>{{.Title}}</h3><div class="tl">{{.SVG}}</div>{{end}}
<details><summary>the story, as the harness told it</summary><pre>{{.Narrative}}</pre></details>
</section>{{end}}{{end}}
</body></html>
`))
