package rules

// Input is one place a program takes a value: a flag of a verb, or a member
// of a JSON body the receiver takes.
type Input struct {
	Program string // "queuectl", "sender", "receiver"
	// Verb is queuectl's verb or the sender's subcommand; "" for the
	// receiver's own flags; "POST /faults" or "POST /orders" for a body.
	Verb string
	// Flag is the flag ("--qty") or, for a body, the member ("qty").
	Flag string
	Rule Rule
	// Clauses are those that give this input its rule ("§3.enqueue.flags").
	Clauses []string
	// Needs are the other flags (a body's other members, as JSON) the
	// input needs to be a whole command, with valid values; --db, and the
	// sender's --url, are the lab's to give.
	Needs []string
	// Format places the value in what is given: "" is the value itself;
	// "127.0.0.1:%s" a port in --addr; "[%s]" one id in a JSON list.
	Format string
	// Full tries every case of the rule (Rule.Cases); otherwise the input
	// is tried with Rule.Ends. One input of each program and rule is full:
	// a program checks a rule with one piece of code more often than not,
	// and the ends of each other input find the one that skips or bends it,
	// at a tenth of the process starts.
	Full bool
	// Past tries only one past each end (the refusals of Rule.Ends): a flag
	// every verb shares, whose accepted ends another verb tries.
	Past bool
}

// Body reports whether the input is a member of an HTTP body.
func (in Input) Body() bool { return len(in.Verb) > 5 && in.Verb[:5] == "POST " }

// Name is the input as a message names it: "queuectl enqueue --qty",
// "receiver POST /faults hold_next".
func (in Input) Name() string {
	s := in.Program
	if in.Verb != "" {
		s += " " + in.Verb
	}
	return s + " " + in.Flag
}

// Cases are the cases the input is tried with.
func (in Input) Cases() []Case {
	switch {
	case in.Body():
		return in.Rule.JSONCases()
	case in.Full:
		return in.Rule.Cases()
	case in.Past:
		var out []Case
		for _, c := range in.Rule.Ends() {
			if c.Want != Accepted {
				out = append(out, c)
			}
		}
		return out
	default:
		return in.Rule.Ends()
	}
}

// The queuectl verbs that take --db, and what each needs besides the input.
var dbVerbs = []struct {
	verb  string
	needs []string
}{
	{"init", nil},
	{"enqueue", []string{"--id", "v-1", "--qty", "7"}},
	{"claim", []string{"--owner", "lab"}},
	{"finish", []string{"--id", "v-1", "--token", "1", "--outcome", "ok"}},
	{"redrive", []string{"--id", "v-1", "--note", "T-1"}},
	{"investigate", []string{"--id", "v-1", "--note", "T-1"}},
	{"show", []string{"--id", "v-1"}},
	{"stats", nil},
	{"check", nil},
}

// senderNeeds are what `sender run-once` needs besides the input, --db and
// --url (the lab's: where its receiver is).
var senderNeeds = []string{"--owner", "lab"}

// Inputs lists every input of every program that takes a value rule, in the
// order the contract names them: §3's verbs, §4's sender, §5's receiver and
// its bodies. It is the contract's "which inputs take which value".
func Inputs() []Input {
	q := func(verb, flag string, r Rule, clause string, needs ...string) Input {
		return Input{Program: "queuectl", Verb: verb, Flag: flag, Rule: r, Clauses: []string{clause}, Needs: without(needs, flag)}
	}
	full := func(in Input) Input { in.Full = true; return in }
	enq, claim, finish, redrive, investigate, show := dbVerbs[1].needs, dbVerbs[2].needs, dbVerbs[3].needs, dbVerbs[4].needs, dbVerbs[5].needs, dbVerbs[6].needs
	backoff := []string{"--id", "v-1", "--attempt", "1"}
	out := []Input{
		// Each verb's own flags (§3 table). The owner has the id's pattern: in
		// full on the sender, the ends here.
		full(q("enqueue", "--id", ID, "§3.enqueue.flags", enq...)),
		full(q("enqueue", "--qty", Qty, "§3.enqueue.flags", enq...)),
		q("enqueue", "--max-attempts", MaxAttempts, "§3.enqueue.flags", enq...),
		q("enqueue", "--deadline-ms", DeadlineWindow, "§3.enqueue.flags", enq...),
		q("claim", "--owner", Owner, "§3.claim.flags", claim...),
		q("claim", "--lease-ms", Lease, "§3.claim.flags", claim...),
		q("finish", "--id", ID, "§3.finish.json", finish...),
		q("finish", "--token", Token, "§3.finish.json", finish...),
		full(q("finish", "--outcome", OutcomeRule, "§3.finish.json", finish...)),
		q("redrive", "--id", ID, "§3.redrive.json", redrive...),
		full(q("redrive", "--note", Note, "§3.redrive.json", redrive...)),
		q("investigate", "--id", ID, "§3.investigate.json", investigate...),
		q("investigate", "--note", Note, "§3.investigate.json", investigate...),
		q("show", "--id", ID, "§3.show.json", show...),
		q("check", "--max", CheckMax, "§3.check.report"),
		q("backoff", "--id", ID, "§3.backoff.flags", backoff...),
		q("backoff", "--attempt", BackoffAttempt, "§3.backoff.flags", backoff...),
	}
	// The flags every verb takes (§3.flags): their ends on enqueue, one past
	// each end on every other verb.
	for _, v := range append(dbVerbs, struct {
		verb  string
		needs []string
	}{"backoff", backoff}) {
		now, busy := q(v.verb, "--now-ms", Now, "§3.flags", v.needs...), q(v.verb, "--busy-timeout-ms", QueuectlBusy, "§3.flags", v.needs...)
		now.Past, busy.Past = v.verb != "enqueue", v.verb != "enqueue"
		out = append(out, now, busy)
	}
	// The sender (§4.flags).
	s := func(flag string, r Rule) Input {
		return Input{Program: "sender", Verb: "run-once", Flag: flag, Rule: r, Clauses: []string{"§4.flags"}, Needs: without(senderNeeds, flag)}
	}
	out = append(out, full(s("--owner", Owner)), s("--lease-ms", Lease), s("--now-ms", Now), full(s("--timeout-ms", SenderTimeout)),
		s("--busy-timeout-ms", SenderBusy), s("--exit-after-receipt", ExitAfter))
	// The receiver's flags (§5.flags); the port is a part of --addr. Its
	// order id is tried in full in the bodies below, at no process start.
	r := func(flag string, rule Rule) Input {
		return Input{Program: "receiver", Flag: flag, Rule: rule, Clauses: []string{"§5.flags"}}
	}
	port := r("--addr", Port)
	port.Format = "127.0.0.1:%s"
	out = append(out, full(r("--fail-next", FaultCount)), r("--hold-next", FaultCount), r("--busy-timeout-ms", ReceiverBusy),
		port, r("--reject-id", ID), full(r("--loose-ack", LooseAckFlag)))
	// The receiver's bodies (§5.body, §5.faults.post): every case each, as
	// they cost no process start.
	b := func(verb, member string, rule Rule, clause string, needs ...string) Input {
		return Input{Program: "receiver", Verb: verb, Flag: member, Rule: rule, Clauses: []string{clause}, Needs: needs, Full: true}
	}
	rejectIDs := b("POST /faults", "reject_ids", ID, "§5.faults.post")
	rejectIDs.Format = "[%s]"
	return append(out,
		b("POST /orders", "id", ID, "§5.body", `"qty":7`, `"token":1`),
		b("POST /orders", "qty", Qty, "§5.body", `"token":1`),
		b("POST /faults", "fail_next", FaultCount, "§5.faults.post"),
		b("POST /faults", "hold_next", FaultCount, "§5.faults.post"),
		b("POST /faults", "loose_ack", LooseAckBody, "§5.faults.post"),
		rejectIDs,
	)
}

// without drops flag and its value from needs.
func without(needs []string, flag string) []string {
	var out []string
	for i := 0; i < len(needs); i += 2 {
		if needs[i] != flag {
			out = append(out, needs[i], needs[i+1])
		}
	}
	return out
}
