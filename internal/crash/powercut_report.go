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

// PowerCutStep describes `lab crash --power-cut` as a lab step, for the
// lab's encoders and `lab grade`.
var PowerCutStep = labresult.Step{Num: 10, Slug: "powercut", Title: "Every state a power cut may leave",
	Checks: "each program of the order story (enqueue, sender run-once, the receiver handling a POST, redrive, finish) is " +
		"recorded from outside: every write with its bytes, sync, create, rename and unlink of its files. Before each sync and each " +
		"answer, the states a power cut may leave are built (synced data survives; unsynced writes dropped, torn at 512-byte sectors " +
		"or kept out of order; a create, unlink or rename only after its directory's sync); on each the programs restart and: what " +
		"they had answered holds, integrity_check is ok, and after a drain every accepted order exists once, no token is granted " +
		"twice, redrives are audited once.",
	Why: "a process crash keeps what was written; a power cut keeps only what was synced. An answer given before the journal's " +
		"deletion reached the directory, or before a commit was synced at all, is a promise the next power cut breaks."}

// Result renders the report as one lab step result.
func (rep *PowerCutReport) Result() labresult.Result {
	r := labresult.Result{Step: PowerCutStep, Pass: rep.OK, Took: time.Duration(rep.TookS * float64(time.Second))}
	for _, p := range rep.Programs {
		c := labresult.Check{What: fmt.Sprintf("%s survives each of %d power-cut states (%d distinct, budget %s, seed %d)", p.Title, p.Built, p.Checked, rep.Budget.Name, rep.Seed),
			Expected: "0 violations", Observed: fmt.Sprintf("%d violation(s)", p.Violations), Why: PowerCutStep.Why,
			OK: p.Violations == 0 && p.Error == ""}
		if p.Error != "" {
			c.Observed = p.Error
		}
		for _, v := range rep.Violations {
			if v.Program == p.Program {
				c.Observed += fmt.Sprintf("; first: barrier %d (%s) state %d (%s) broke %s: %s. Replay: %s",
					v.Barrier, v.Call, v.State, v.Label, v.Invariant, v.Detail, v.Replay)
				break
			}
		}
		r.Checks = append(r.Checks, c)
	}
	var b strings.Builder
	rep.WriteText(&b)
	r.Narrative = b.String()
	return r
}

// WriteText prints one line per program, then the tail.
func (rep *PowerCutReport) WriteText(w io.Writer) error {
	for _, p := range rep.Programs {
		fmt.Fprintln(w, p.Line())
	}
	return rep.WriteTail(w)
}

// WriteTail prints the first violation of each program with the picture of
// its state and its replay command (the others one line each, up to three
// per program), the timing and the verdict.
func (rep *PowerCutReport) WriteTail(w io.Writer) error {
	shown, more := map[string]int{}, map[string]int{}
	for _, v := range rep.Violations {
		switch shown[v.Program] {
		case 0:
			fmt.Fprintf(w, "VIOLATION %s, power cut %s (barrier %d, state %d: %s): %s\n    %s\n%s\n    replay: %s\n",
				v.Program, v.Call, v.Barrier, v.State, v.Label, v.Invariant, v.Detail, v.Picture, v.Replay)
		case 1, 2:
			fmt.Fprintf(w, "VIOLATION %s, power cut %s (barrier %d, state %d): %s: %s\n    replay: %s\n",
				v.Program, v.Call, v.Barrier, v.State, v.Invariant, v.Detail, v.Replay)
		default:
			more[v.Program]++
			continue
		}
		shown[v.Program]++
	}
	for _, p := range sortedKeys(more) {
		fmt.Fprintf(w, "… and %d more violation(s) of %s (--json - lists them all, with their pictures)\n", more[p], p)
	}
	built, checked, outcomes := 0, 0, 0
	for _, p := range rep.Programs {
		built, checked, outcomes = built+p.Built, checked+p.Checked, outcomes+p.Outcomes
	}
	ratio := 0.0
	if rep.FloorS > 0 {
		ratio = rep.PerStateS / rep.FloorS
	}
	fmt.Fprintf(w, "power-cut: %d states built, %d distinct checked, %d outcomes drained (budget %s, seed %d); %.3fs per state checked (one process start here: %.1fms, ×%.1f); %d processes; %.1fs\n",
		built, checked, outcomes, rep.Budget.Name, rep.Seed, rep.PerStateS, rep.FloorS*1000, ratio, rep.Procs, rep.TookS)
	if rep.Work != "" {
		fmt.Fprintf(w, "power-cut: work dir kept: %s\n", rep.Work)
	}
	verdict := "ok: 0 violations"
	if !rep.OK {
		verdict = fmt.Sprintf("FAILED: %d violation(s)", len(rep.Violations))
	}
	_, err := fmt.Fprintf(w, "power-cut: %s\n", verdict)
	return err
}

// WriteJSON writes the whole report as one JSON object.
func (rep *PowerCutReport) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rep)
}

// WriteHTML writes a self-contained page: the verdict, one row per
// program, and every violation with the picture of its state.
func (rep *PowerCutReport) WriteHTML(w io.Writer) error {
	return powerCutHTML.Execute(w, rep)
}

var powerCutHTML = template.Must(template.New("powercut").Funcs(template.FuncMap{"mul": func(a, b float64) float64 { return a * b },
	"contract": func() string { return labresult.ContractText }}).Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>snacklab lab crash --power-cut</title>
<style>
body{font:15px/1.45 system-ui,sans-serif;margin:2rem auto;max-width:1200px;padding:0 1rem;color:#222}
.ok{color:#2e7d32;font-weight:bold}.bad{color:#c62828;font-weight:bold}
table{border-collapse:collapse;margin:1rem 0}td,th{padding:.3rem .6rem;border-bottom:1px solid #ddd;text-align:left}
pre{white-space:pre;overflow-x:auto;font-size:.85em;background:#fafafa;padding:.6rem;border:1px solid #eee}
</style></head><body>
<h1>lab crash --power-cut: {{if .OK}}<span class="ok">0 violations</span>{{else}}<span class="bad">{{len .Violations}} violation(s)</span>{{end}}</h1>
<p>Executables <code>{{.Bin}}</code>, graded against {{contract}}; budget {{.Budget.Name}}, seed {{.Seed}}; {{printf "%.1f" .TookS}} s; {{.Procs}} processes; one state checked took {{printf "%.3f" .PerStateS}} s, one process start {{printf "%.1f" (mul .FloorS 1000)}} ms.</p>
<table><tr><th>program</th><th>operations</th><th>barriers (exhaustive)</th><th>states built</th><th>distinct, checked</th><th>outcomes drained</th><th>violations</th><th>time</th></tr>
{{range .Programs}}<tr><td>{{.Title}}</td><td>{{.Ops}}</td><td>{{.Barriers}} ({{.Exhaustive}})</td><td>{{.Built}}</td><td>{{.Checked}}</td><td>{{.Outcomes}}</td><td>{{if .Error}}<span class="bad">{{.Error}}</span>{{else if .Violations}}<span class="bad">{{.Violations}}</span>{{else}}0{{end}}</td><td>{{printf "%.1f" .TookS}} s</td></tr>
{{end}}</table>
{{if .Violations}}<h2>Violations</h2>{{range .Violations}}<h3>{{.Program}}: power cut {{.Call}} (barrier {{.Barrier}}, state {{.State}}: {{.Label}}): {{.Invariant}}</h3>
<p>{{.Detail}}</p><pre>{{.Picture}}</pre><p>replay: <code>{{.Replay}}</code></p>{{end}}{{end}}
</body></html>
`))
