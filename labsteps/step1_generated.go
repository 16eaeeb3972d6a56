package labsteps

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"snacklab/labsteps/harness"
	"snacklab/labsteps/rules"
)

// generatedValues is the generated part: every input of rules.Inputs tried
// with every case its rule derives (CONTRACT §1, the flag ranges of §3–§5,
// the receiver's bodies). The expected outcome is the rule's: a refused value
// exits 2 (malformed) or 3 (invalid) with nothing on stdout and the queue
// file as it was; the receiver answers a refused body member 400 (a fault
// 4xx) and changes nothing. An accepted value must not be refused (no exit 2
// or 3): queuectl and the sender run it on a second queue file, made like the
// first, which they may change; the receiver on a file in a directory that
// does not exist, so that it exits 4 there and never starts a server.
func generatedValues(h *harness.Harness) {
	// Every clause rules.Inputs can name (the registry reads the ids from
	// the source; TestGeneratedNamesEveryRuleClause holds the list to the
	// rules).
	h.Clause("§1.id", "§1.qty", "§1.max-attempts", "§1.deadline-window", "§1.lease", "§1.owner", "§1.note", "§1.outcome",
		"§1.now", "§1.token", "§1.invalid", "§1.int.plain", "§1.int.range", "§6.nothing-written", "§6.codes",
		"§3.flags", "§3.enqueue.flags", "§3.claim.flags", "§3.finish.json", "§3.redrive.json", "§3.investigate.json",
		"§3.show.json", "§3.backoff.flags", "§3.check.report", "§4.flags", "§5.flags", "§5.body", "§5.faults.post")
	h.UseQueue("queue-generated.db")
	h.Init()
	h.Enqueue("v-1", 7, t0) // a job a wrongly accepted claim, finish or sender would touch
	refusedDB := h.DB
	// The copy the accepted values run on (init and enqueue again: a file
	// the programs made is one they can write, whoever they run as).
	h.UseQueue("queue-accepted.db")
	h.Init()
	h.Enqueue("v-1", 7, t0)
	acceptedDB := h.DB
	h.UseQueue("queue-generated.db")
	missing := filepath.Join(h.Dir, "no-such-dir", "queue.db")
	url := h.RefusedURL()

	var cmdInputs, bodyInputs []rules.Input
	for _, in := range rules.Inputs() {
		if in.Body() {
			bodyInputs = append(bodyInputs, in)
		} else {
			cmdInputs = append(cmdInputs, in)
		}
	}

	before := h.Snapshot()
	runs := runValueCases(h, cmdInputs, dbs{refused: refusedDB, accepted: acceptedDB, missing: missing}, url)
	for _, in := range cmdInputs {
		cases := in.Cases()
		for _, c := range cases {
			r := runs[caseKey{in.Name(), c.Name}]
			want, wantOut := expectedExit(in, c)
			if want < 0 && accepted(r.Code) || want >= 0 && r.Code == want && (wantOut || r.Stdout == "") {
				continue
			}
			h.Clause(caseClauses(in, c)...)
			h.Check(fmt.Sprintf("generated: %s, case %s (%s)", in.Name(), c.Name, shown(c.Value)), false,
				expectation(in, c, want), fmt.Sprintf("%s%s", r.Exit(), r.StderrHint()+stdoutHint(r, wantOut)),
				in.Rule.Text()+"; "+outcomeWhy(c.Want)+". Command: "+r.Cmdline())
		}
		h.Clause(inputClauses(in)...)
		h.Check(fmt.Sprintf("generated: %s, %d cases of %s", in.Name(), len(cases), in.Rule.Clause), true, "", "each as the rule says", in.Rule.Text())
	}
	h.Clause("§1.invalid", "§6.nothing-written", "§4.flags", "§3.flags")
	h.ExpectUnchanged(before, nil, "a refused value writes nothing (CONTRACT §1.invalid, §6.nothing-written), and an accepted one was given no queue file",
		"the generated command lines")
	_, err := os.Stat(filepath.Dir(missing))
	h.Check("no generated command created the missing directory", os.IsNotExist(err), "no-such-dir still missing", fmt.Sprintf("stat: %v", err),
		"a program creates its file, never its directory (CONTRACT §3.init.no-dir, §5.start.file)")

	h.Clause("§5.body", "§5.faults.post", "§5.flags", "§1.id", "§1.qty")
	rcv := h.StartReceiver("generated-receiver.db")
	for _, in := range bodyInputs {
		bodyCases(h, rcv, in)
	}
}

// generatedAtOnce is how many generated command lines run at once: enough to
// overlap one process's start with another's exit, few enough not to crowd
// a loaded two-core grader.
const generatedAtOnce = 6

// caseKey names one case of one input.
type caseKey struct{ input, kase string }

// slot is an input and its accepted cases, for the batches of its verb.
type slot struct {
	in    rules.Input
	cases []rules.Case
}

// batch is one command line and the cases it tries.
type batch struct {
	cmd   []string
	cases []caseKey
}

// dbs are the files the generated cases run on: the refused values' (which
// must stay as it was), the accepted values' copy, and one in a directory
// that does not exist (the receiver's).
type dbs struct{ refused, accepted, missing string }

// forCase is the file a case of in runs on.
func (d dbs) forCase(in rules.Input, c rules.Case) string {
	switch {
	case in.Program == "receiver":
		// The receiver never gets a directory: a wrongly accepted value
		// must not start a server, and a refusal comes before the missing
		// directory (§6.codes).
		return d.missing
	case c.Want == rules.Accepted:
		return d.accepted
	}
	return d.refused
}

// runValueCases runs every case of inputs and returns, for each, the run that
// judges it. A refused case runs alone, a few at once, on the refused
// values' file. Accepted cases run together, in turn (they may write): one
// command line per verb gives each of its inputs one accepted value at once,
// and only a batch that is refused is run again case by case, so that its
// failure names its case. That keeps the process starts near one per
// refusal.
func runValueCases(h *harness.Harness, inputs []rules.Input, d dbs, url string) map[caseKey]*harness.Run {
	var alone, refusals, together []batch
	var verbs []string
	byVerb := map[string][]slot{}
	for _, in := range inputs {
		var accepted []rules.Case
		for _, c := range in.Cases() {
			k := caseKey{in.Name(), c.Name}
			if c.Want == rules.Accepted {
				accepted = append(accepted, c)
				alone = append(alone, batch{commandLine(in, in.Needs, []string{in.Flag, placed(in, c.Value)}, d.forCase(in, c), url), []caseKey{k}})
				continue
			}
			refusals = append(refusals, batch{commandLine(in, in.Needs, []string{in.Flag, placed(in, c.Value)}, d.forCase(in, c), url), []caseKey{k}})
		}
		v := in.Program + " " + in.Verb
		if _, ok := byVerb[v]; !ok {
			verbs = append(verbs, v)
		}
		byVerb[v] = append(byVerb[v], slot{in, accepted})
	}
	// alone holds each accepted case by itself, for the second round;
	// together gets the refusals and then the accepted batches.
	single := map[caseKey][]string{}
	for _, b := range alone {
		single[b.cases[0]] = b.cmd
	}
	for _, v := range verbs {
		slots := byVerb[v]
		for k := 0; ; k++ {
			var flags []string
			var keys []caseKey
			var in rules.Input
			given := map[string]bool{}
			for _, sl := range slots {
				if k < len(sl.cases) && !given[sl.in.Flag] {
					in = sl.in
					given[sl.in.Flag] = true
					flags = append(flags, sl.in.Flag, placed(sl.in, sl.cases[k].Value))
					keys = append(keys, caseKey{sl.in.Name(), sl.cases[k].Name})
				}
			}
			if len(keys) == 0 {
				break
			}
			together = append(together, batch{commandLine(in, verbNeeds(slots, given), flags, d.forCase(in, rules.Case{Want: rules.Accepted}), url), keys})
		}
	}
	out := map[caseKey]*harness.Run{}
	for i, r := range execBatches(h, refusals, generatedAtOnce) {
		out[refusals[i].cases[0]] = r
	}
	again := map[caseKey]bool{}
	for i, r := range execBatches(h, together, 1) {
		b := together[i]
		for _, k := range b.cases {
			out[k] = r
		}
		if len(b.cases) > 1 && !batchAccepted(b.cmd, r.Code) {
			for _, k := range b.cases {
				again[k] = true
			}
		}
	}
	var retry []batch
	for _, b := range alone {
		if again[b.cases[0]] {
			retry = append(retry, batch{single[b.cases[0]], b.cases})
		}
	}
	for i, r := range execBatches(h, retry, 1) {
		out[retry[i].cases[0]] = r
	}
	return out
}

// batchAccepted reports whether an accepted batch exited as one: the
// receiver meets its missing directory (exit 4); any other program answers
// anything but a refusal.
func batchAccepted(cmd []string, code int) bool {
	if cmd[0] == "receiver" {
		return code == 4
	}
	return accepted(code)
}

// accepted reports whether an exit says the values were taken: neither a
// usage error (2) nor invalid input (3), and an exit at all (not a signal).
func accepted(code int) bool { return code >= 0 && code != 2 && code != 3 }

// verbNeeds are the flags a verb's inputs need, each once, without those a
// batch gives: each input needs the verb's flags but its own, so together
// they name them all.
func verbNeeds(slots []slot, given map[string]bool) []string {
	var out []string
	seen := map[string]bool{}
	for _, sl := range slots {
		for i := 0; i+1 < len(sl.in.Needs); i += 2 {
			f := sl.in.Needs[i]
			if !given[f] && !seen[f] {
				seen[f] = true
				out = append(out, f, sl.in.Needs[i+1])
			}
		}
	}
	return out
}

// execBatches runs the batches' command lines, n at once.
func execBatches(h *harness.Harness, bs []batch, n int) []*harness.Run {
	var runs []*harness.Run
	for i := 0; i < len(bs); i += n {
		var cmds [][]string
		for _, b := range bs[i:min(i+n, len(bs))] {
			cmds = append(cmds, b.cmd)
		}
		runs = append(runs, h.ExecAll(cmds)...)
	}
	return runs
}

// commandLine is in's program and verb with --db, the sender's --url, needs
// and then flags (the values tried).
func commandLine(in rules.Input, needs, flags []string, db, url string) []string {
	cmd := []string{in.Program}
	if in.Verb != "" {
		cmd = append(cmd, in.Verb)
	}
	if in.Verb != "backoff" {
		cmd = append(cmd, "--db", db)
	}
	if in.Program == "sender" {
		cmd = append(cmd, "--url", url)
	}
	return append(append(cmd, needs...), flags...)
}

// placed is the value as the input takes it (a port inside --addr).
func placed(in rules.Input, v string) string {
	if in.Format == "" {
		return v
	}
	return fmt.Sprintf(in.Format, v)
}

// expectedExit is the exit the rule gives c on in, and whether stdout may
// carry an answer.
func expectedExit(in rules.Input, c rules.Case) (code int, stdout bool) {
	switch c.Want {
	case rules.Malformed:
		return 2, false
	case rules.Invalid:
		return 3, false
	}
	if in.Program == "receiver" {
		return 4, false
	}
	return -1, true // any answer but a refusal (accepted)
}

// expectation says what was expected, from the rule.
func expectation(in rules.Input, c rules.Case, code int) string {
	switch c.Want {
	case rules.Accepted:
		if code == 4 {
			return "exit 4: the value is accepted, and the missing directory is next"
		}
		return "the value is accepted: any exit but 2 (usage) or 3 (invalid input)"
	case rules.Malformed:
		return "exit 2 (malformed: §1.int.plain), nothing on stdout"
	}
	return "exit 3 (invalid input: " + in.Rule.Clause + "), nothing on stdout"
}

func outcomeWhy(o rules.Outcome) string {
	switch o {
	case rules.Accepted:
		return "a value the contract allows is never refused, or a correct client is turned away"
	case rules.Malformed:
		return "an integer is plain decimal: any other spelling is a usage error (exit 2), never read as some number (§1.int.plain)"
	}
	return "a value outside its rule is invalid input, exit 3 with nothing written (§1.invalid), on every input that takes it"
}

func stdoutHint(r *harness.Run, allowed bool) string {
	if allowed || r.Stdout == "" {
		return ""
	}
	return fmt.Sprintf(" (stdout: %s)", harness.Trim(r.Stdout))
}

// shown is a value as a message prints it: quoted, with its bytes visible.
func shown(v string) string {
	if len(v) > 24 {
		return fmt.Sprintf("%q… (%d bytes)", v[:20], len(v))
	}
	return fmt.Sprintf("%q", v)
}

// caseClauses are the clauses a failure of c on in names.
func caseClauses(in rules.Input, c rules.Case) []string {
	out := append(slices.Clone(in.Clauses), c.Clauses(in.Rule)...)
	if c.Want == rules.Invalid {
		out = append(out, "§1.invalid")
	}
	if c.Want != rules.Accepted {
		out = append(out, "§6.nothing-written")
	}
	if in.Program == "receiver" && c.Want != rules.Accepted {
		out = append(out, "§6.codes") // the invalid value before the missing directory
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// inputClauses are the clauses of every case tried on in.
func inputClauses(in rules.Input) []string {
	var out []string
	for _, c := range in.Cases() {
		for _, id := range caseClauses(in, c) {
			if !slices.Contains(out, id) {
				out = append(out, id)
			}
		}
	}
	return out
}

// bodyCases posts each case of a body member to rcv: an accepted order is
// 200 with ack true and adds its qty; an accepted fault is 200 and is then
// reset; a refused one is 400 (a fault: 4xx) and leaves the stock, the
// orders and the faults as they were.
func bodyCases(h *harness.Harness, rcv *harness.Receiver, in rules.Input) {
	h.Clause("§5.body", "§5.faults.post") // each case names its own below
	orders := in.Verb == "POST /orders"
	path := strings.TrimPrefix(in.Verb, "POST ")
	faults := func() string { return h.HTTP("POST", rcv.URL+"/faults", "{}").Body }
	const reset = `{"fail_next":0,"hold_next":0,"loose_ack":"","reject_ids":[]}`
	cases := in.Cases()
	for i, c := range cases {
		members := []string{fmt.Sprintf("%q:%s", in.Flag, placed(in, c.Value))}
		if orders && in.Flag != "id" {
			members = append(members, fmt.Sprintf(`"id":"gen-%s-%d"`, in.Flag, i))
		}
		body := "{" + strings.Join(append(members, in.Needs...), ",") + "}"
		stock, before := rcv.Stock(), faults()
		a := h.HTTP("POST", rcv.URL+path, body)
		var ok bool
		var want string
		switch {
		case c.Want == rules.Accepted && orders:
			ok, want = a.Status == 200 && a.Ack() == "true", "200 with \"ack\":true"
		case c.Want == rules.Accepted:
			ok, want = a.Status == 200, "200"
		case orders:
			after := rcv.Stock()
			ok, want = a.Status == 400 && after.Stock == stock.Stock && after.Orders == stock.Orders,
				fmt.Sprintf("400, the stock (%d) and the orders (%d) unchanged", stock.Stock, stock.Orders)
			if a.Status == 400 && !ok {
				a.Body += fmt.Sprintf(" (stock now %d, orders %d)", after.Stock, after.Orders)
			}
		default:
			after := faults()
			ok, want = a.Status >= 400 && a.Status < 500 && after == before, "a 4xx refusal, the faults unchanged: "+harness.Trim(before)
			if a.Status >= 400 && a.Status < 500 && !ok {
				a.Body += " (faults now " + harness.Trim(after) + ")"
			}
		}
		if !ok {
			h.Clause(caseClauses(in, c)...)
			h.Check(fmt.Sprintf("generated: %s, case %s (%s)", in.Name(), c.Name, shown(c.Value)), false, want, a.String(),
				in.Rule.Text()+"; "+outcomeWhy(c.Want)+". Body: "+body)
		}
		if c.Want == rules.Accepted && !orders {
			h.HTTP("POST", rcv.URL+"/faults", reset)
		}
	}
	h.Clause(inputClauses(in)...)
	h.Check(fmt.Sprintf("generated: %s, %d cases of %s", in.Name(), len(cases), in.Rule.Clause), true, "", "each as the rule says", in.Rule.Text())
}
