package crash

import (
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"strings"
	"time"

	labresult "snacklab/labsteps/result"
)

// Step describes `lab crash` as a lab step, for the reports the lab's
// encoders write (Gradescope results.json, JUnit) and for `lab grade`.
var Step = labresult.Step{Num: 9, Slug: "crash", Title: "Crash-restart at every crash point",
	Checks: "each program of the order story (enqueue, sender run-once, the receiver handling a POST, redrive, finish) " +
		"is killed at every sync, write to a SQLite file, socket send and journal removal in turn; after each kill the story " +
		"restarts what it needs, drains the queue and checks: every accepted order exists once with its qty, stock matches the " +
		"orders, no token is granted twice or goes back, redrives are audited once, both files pass integrity_check, no lease is " +
		"left, and answers come only after their commit reached the disk. Then random SIGKILLs soak the whole system.",
	Why: "a crash can land between any two system calls; an answer given before its commit, or an effect split over two " +
		"transactions, loses or doubles an order only when a crash hits that gap, which no hand-picked kill point finds."}

// Result renders the report as one lab step result, so the lab's own
// encoders (report.WriteGradescope, WriteJUnit) can write it.
func (rep *Report) Result() labresult.Result {
	r := labresult.Result{Step: Step, Pass: rep.OK, Took: time.Duration(rep.TookS * float64(time.Second))}
	for _, p := range rep.Programs {
		c := labresult.Check{What: fmt.Sprintf("%s survives a crash at each of its %d crash points", p.Title, p.Points),
			Expected: "0 violations, answers durable", Observed: fmt.Sprintf("%d violation(s), durable answers: %s", p.Violations, p.Durable),
			Why: Step.Why, OK: p.Violations == 0 && p.Error == ""}
		if p.Error != "" {
			c.Observed = p.Error
		}
		if v := rep.first(p.Program); v != nil {
			c.Observed += fmt.Sprintf("; first: %s at crash point %d (%s) broke %s: %s. Replay: %s",
				v.Program, v.N, v.Call, v.Invariant, v.Detail, v.Replay)
		}
		r.Checks = append(r.Checks, c)
	}
	if s := rep.Soak; s != nil {
		c := labresult.Check{What: fmt.Sprintf("the system survives %d random SIGKILLs (seed %d)", s.Kills, s.Seed),
			Expected: "every accepted job done, 0 lost, 0 doubled, integrity ok", Observed: s.Line(), Why: Step.Why,
			OK: len(s.Violations) == 0}
		if len(s.Violations) > 0 {
			v := s.Violations[0]
			c.Observed += fmt.Sprintf("; first: %s: %s. Replay: %s", v.Invariant, v.Detail, v.Replay)
		}
		r.Checks = append(r.Checks, c)
	}
	var b strings.Builder
	rep.WriteText(&b)
	r.Narrative = b.String()
	return r
}

func (rep *Report) first(program string) *Violation {
	for i := range rep.Violations {
		if rep.Violations[i].Program == program {
			return &rep.Violations[i]
		}
	}
	return nil
}

// WriteText prints one line per program, the soak's line, every violation
// with its replay command, and the timing.
func (rep *Report) WriteText(w io.Writer) error {
	for _, p := range rep.Programs {
		fmt.Fprintln(w, p.Line())
	}
	if rep.Soak != nil {
		fmt.Fprintln(w, rep.Soak.Line())
	}
	return rep.WriteTail(w)
}

// WriteTail prints every violation with its replay command, the timing
// and the verdict: what WriteText prints after the program lines.
func (rep *Report) WriteTail(w io.Writer) error {
	// The first three of each program; the JSON report has them all.
	shown, more := map[string]int{}, map[string]int{}
	for _, v := range rep.Violations {
		if shown[v.Program] == 3 {
			more[v.Program]++
			continue
		}
		shown[v.Program]++
		fmt.Fprintf(w, "VIOLATION %s at crash point %d (%s): %s\n    %s\n    replay: %s\n", v.Program, v.N, v.Call, v.Invariant, v.Detail, v.Replay)
	}
	for _, p := range sortedKeys(more) {
		fmt.Fprintf(w, "… and %d more violation(s) of %s (lab crash --json - lists them all)\n", more[p], p)
	}
	points := 0
	for _, p := range rep.Programs {
		points += p.Points
	}
	ratio := 0.0
	if rep.FloorS > 0 {
		ratio = rep.PerPointS / rep.FloorS
	}
	if len(rep.Programs) > 0 {
		fmt.Fprintf(w, "crash: %d crash points, %.3fs each (one process start here: %.1fms, ×%.0f); %d processes; %.1fs\n",
			points, rep.PerPointS, rep.FloorS*1000, ratio, rep.Procs, rep.TookS)
	} else {
		fmt.Fprintf(w, "crash: %d processes; %.1fs\n", rep.Procs, rep.TookS)
	}
	if rep.Work != "" {
		fmt.Fprintf(w, "crash: work dir kept: %s\n", rep.Work)
	}
	verdict := "ok: 0 violations"
	if !rep.OK {
		verdict = fmt.Sprintf("FAILED: %d violation(s)", len(rep.Violations))
	}
	_, err := fmt.Fprintf(w, "crash: %s\n", verdict)
	return err
}

// WriteJSON writes the whole report as one JSON object.
func (rep *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rep)
}

// callLetter abbreviates a crash point's call in the picture.
func callLetter(p Point) string {
	switch {
	case p.File == "socket":
		return "N" // network
	case strings.HasPrefix(p.Call, "fsync") || strings.HasPrefix(p.Call, "fdatasync") || p.Call == "sync_file_range":
		return "S"
	case strings.HasPrefix(p.Call, "unlink") || strings.HasPrefix(p.Call, "rename") || strings.Contains(p.Call, "truncate"):
		return "U"
	}
	return "W"
}

// SVG draws the crash points: one row per program, one cell per point in
// order, lettered by system call (W write, S sync, U journal removal, N
// network send), green when every invariant held, red when one broke.
func (rep *Report) SVG() template.HTML {
	const cell, gap, left, top = 15, 1, 70, 24
	width := left
	for _, p := range rep.Programs {
		width = max(width, left+p.Points*(cell+gap)+10)
	}
	height := top + len(rep.Programs)*(cell+10) + 30
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="ui-monospace,monospace" font-size="11">`, width, height)
	fmt.Fprintf(&b, `<text x="4" y="14" fill="#555">crash point N →  (W write to a SQLite file · S fsync/fdatasync · U journal removal · N socket send)</text>`)
	for row, pr := range rep.Programs {
		y := top + row*(cell+10)
		fmt.Fprintf(&b, `<text x="4" y="%d">%s</text>`, y+13, template.HTMLEscapeString(pr.Program))
		i := 0
		for _, p := range rep.Points {
			if p.Program != pr.Program {
				continue
			}
			x := left + i*(cell+gap)
			i++
			fill, tip := "#2e7d32", "ok"
			if !p.OK {
				fill, tip = "#c62828", p.Violations[0].Invariant+": "+p.Violations[0].Detail
			}
			fmt.Fprintf(&b, `<g><title>%s #%d: %s %s → %s</title><rect x="%d" y="%d" width="%d" height="%d" rx="2" fill="%s"/>`+
				`<text x="%d" y="%d" fill="#fff" text-anchor="middle" font-size="10">%s</text></g>`,
				template.HTMLEscapeString(p.Program), p.N, template.HTMLEscapeString(p.Call), template.HTMLEscapeString(p.File),
				template.HTMLEscapeString(tip), x, y, cell, cell, fill, x+cell/2, y+11, callLetter(p))
		}
	}
	ly := top + len(rep.Programs)*(cell+10) + 10
	fmt.Fprintf(&b, `<rect x="4" y="%d" width="12" height="12" fill="#2e7d32"/><text x="20" y="%d">every invariant held</text>`, ly, ly+10)
	fmt.Fprintf(&b, `<rect x="170" y="%d" width="12" height="12" fill="#c62828"/><text x="186" y="%d">an invariant broke (hover for which)</text>`, ly, ly+10)
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

// WriteHTML writes a self-contained page: the verdict, the picture of the
// crash points, one line per program, the soak and every violation.
func (rep *Report) WriteHTML(w io.Writer) error {
	return htmlTmpl.Execute(w, rep)
}

var htmlTmpl = template.Must(template.New("crash").Funcs(template.FuncMap{"mul": func(a, b float64) float64 { return a * b },
	"contract": func() string { return labresult.ContractText }}).Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>snacklab lab crash</title>
<style>
body{font:15px/1.45 system-ui,sans-serif;margin:2rem auto;max-width:1200px;padding:0 1rem;color:#222}
.ok{color:#2e7d32;font-weight:bold}.bad{color:#c62828;font-weight:bold}
table{border-collapse:collapse;margin:1rem 0}td,th{padding:.3rem .6rem;border-bottom:1px solid #ddd;text-align:left}
.pic{overflow-x:auto;border:1px solid #ddd;border-radius:6px;padding:.5rem}
pre{white-space:pre-wrap;font-size:.85em;background:#fafafa;padding:.6rem;border:1px solid #eee}
</style></head><body>
<h1>lab crash: {{if .OK}}<span class="ok">0 violations</span>{{else}}<span class="bad">{{len .Violations}} violation(s)</span>{{end}}</h1>
<p>Executables <code>{{.Bin}}</code>, graded against {{contract}}; {{printf "%.1f" .TookS}} s; {{.Procs}} processes; one crash point took {{printf "%.3f" .PerPointS}} s, one process start {{printf "%.1f" (mul .FloorS 1000)}} ms.</p>
<h2>Crash points by program and system call</h2>
<div class="pic">{{.SVG}}</div>
<table><tr><th>program</th><th>crash points</th><th>violations</th><th>answers durable</th><th>time</th></tr>
{{range .Programs}}<tr><td>{{.Title}}</td><td>{{.Points}}</td><td>{{if .Violations}}<span class="bad">{{.Violations}}</span>{{else}}0{{end}}</td><td>{{.Durable}}</td><td>{{printf "%.1f" .TookS}} s</td></tr>
{{end}}</table>
{{with .Soak}}<h2>Random soak</h2><p>{{.Line}}</p>{{end}}
{{if .Violations}}<h2>Violations</h2>{{range .Violations}}<pre>{{.Program}} at crash point {{.N}} ({{.Call}}): {{.Invariant}}
{{.Detail}}
replay: {{.Replay}}</pre>{{end}}{{end}}
</body></html>
`))
