package labsteps

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"snacklab/labsteps/harness"
)

// jobKeys are the members of JOB (CONTRACT §3) and redriveKeys of REDRIVE:
// the JSON names of the lab's own types for them, so that a member added
// to the contract is added to the shape checks with its field.
var (
	jobKeys     = harness.JSONNames(harness.Job{})
	redriveKeys = harness.JSONNames(harness.Redrive{})
)

// shape is one answer's JSON as members: each key and its compact value.
type shape map[string]json.RawMessage

// shapeOf parses r's stdout as one JSON object, failing the step otherwise.
func shapeOf(h *harness.Harness, r *harness.Run) shape {
	var s shape
	h.Parse(r, &s)
	return s
}

// missing lists the keys of want that s lacks, "" when none.
func (s shape) missing(want []string) string {
	var out []string
	for _, k := range want {
		if _, ok := s[k]; !ok {
			out = append(out, k)
		}
	}
	return strings.Join(out, ", ")
}

// member is s[key] as compact JSON, "absent" when missing.
func (s shape) member(key string) string {
	v, ok := s[key]
	if !ok {
		return "absent"
	}
	return strings.Join(strings.Fields(string(v)), "")
}

// sub parses member key as an object ({} when it is not one).
func (s shape) sub(key string) shape {
	var o shape
	if json.Unmarshal(s[key], &o) != nil || o == nil {
		return shape{}
	}
	return o
}

// keys lists s's keys, sorted, for messages.
func (s shape) keys() string {
	ks := make([]string, 0, len(s))
	for k := range s {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return "{" + strings.Join(ks, ",") + "}"
}

// expectMembers checks that answer s has every key of want.
func expectMembers(h *harness.Harness, what string, s shape, want []string, why string) {
	h.Check(what+": every member is there", s.missing(want) == "", strings.Join(want, ", "),
		fmt.Sprintf("missing: %s (got %s)", s.missing(want), s.keys()), why)
}

// expectJob checks that member key of s is a whole JOB whose unset fields
// (reason, owner, lease_until) are present as null.
func expectJob(h *harness.Harness, what string, s shape, nulls ...string) {
	why := fmt.Sprintf("CONTRACT §3: JOB is the object with all %d members; reason, owner and lease_until are null when unset, ", len(jobKeys)) +
		"never left out: a program reading the answer tells \"no owner\" from \"field missing\" only this way"
	j := s.sub("job")
	expectMembers(h, what+": job", j, jobKeys, why)
	for _, k := range nulls {
		h.Equal(what+": job."+k+" when unset", "null", j.member(k), why)
	}
}

// verbShapes: every verb's JSON answer has the members CONTRACT §3 lists,
// the unset ones null, the empty lists [] and the counts zero.
func verbShapes(h *harness.Harness) {
	h.UseQueue("queue-shapes.db")
	h.Clause("§3.init.json")
	r := h.Queuectl("init", -1)
	h.ExpectExit("`queuectl init`", 0, r, "a fresh queue file")
	s := shapeOf(h, r)
	expectMembers(h, "init", s, []string{"db", "schema_version", "journal_mode"}, "CONTRACT §3: init's JSON")
	h.Equal("init: journal_mode", `"delete"`, s.member("journal_mode"), "CONTRACT §2, §3: a rollback journal")

	h.Clause("§3.stats.json")
	statsShape(h, "stats of an empty queue", "pending=0 leased=0 done=0 dead=0; permanent=0 exhausted=0 deadline=0")

	h.Clause("§3.enqueue.json", "§3.json.job")
	e := h.Enqueue("s-1", 7, t0, "--max-attempts", "1")
	h.ExpectExit("enqueue s-1", 0, e.Run, "the story needs it")
	s = shapeOf(h, e.Run)
	expectMembers(h, "enqueue", s, []string{"job", "duplicate"}, "CONTRACT §3: enqueue's JSON")
	expectJob(h, "enqueue", s, "reason", "owner", "lease_until")
	h.Clause("§3.claim.json", "§3.json.job")
	c := h.Claim("W", t0, 30000)
	h.ExpectExit("claim s-1", 0, c.Run, "s-1 is due")
	s = shapeOf(h, c.Run)
	h.Equal("claim: claimed", "true", s.member("claimed"), "CONTRACT §3: claim's JSON")
	expectJob(h, "claim", s, "reason")
	h.Clause("§3.claim.json", "§3.stdout.answers")
	empty := h.Claim("W", t0, 30000)
	h.ExpectExit("claim with nothing due", 13, empty.Run, "CONTRACT §3: exit 13 is an answer")
	h.Equal("claim with nothing due: claimed", "false", shapeOf(h, empty.Run).member("claimed"),
		"CONTRACT §3: exits 12 and 13 print their JSON object: {\"claimed\":false}")

	h.Clause("§3.finish.json")
	whyFinish := `CONTRACT §3: finish prints {"applied":true,"job":JOB} or {"applied":false,"job":JOB-or-null}: the job key is always there, null only for an unknown id`
	f := h.Finish("s-1", 2, "ok", t0)
	h.ExpectExit("finish s-1 with a wrong token", 12, f.Run, whyFinish)
	s = shapeOf(h, f.Run)
	h.Equal("finish not applied: applied", "false", s.member("applied"), whyFinish)
	expectJob(h, "finish not applied", s, "reason")
	f = h.Finish("no-such-order", 1, "ok", t0)
	h.ExpectExit("finish of an unknown id", 12, f.Run, whyFinish)
	s = shapeOf(h, f.Run)
	h.Equal("finish of an unknown id: applied and job", "applied=false job=null",
		fmt.Sprintf("applied=%s job=%s", s.member("applied"), s.member("job")), whyFinish)
	oneLine(h, r, e.Run, c.Run, empty.Run, f.Run)
	f = h.Finish("s-1", 1, "permanent", t0)
	h.ExpectExit("finish s-1 permanent", 0, f.Run, whyFinish)
	s = shapeOf(h, f.Run)
	h.Equal("finish applied: applied", "true", s.member("applied"), whyFinish)
	expectJob(h, "finish applied", s, "owner", "lease_until")

	h.Clause("§3.show.json")
	whyShow := `CONTRACT §3: show prints {"job":JOB,"redrives":[…],"investigations":[…]}: lists, [] when empty, never null or left out`
	r = h.Queuectl("show", -1, "--id", "s-1")
	h.ExpectExit("show s-1", 0, r, whyShow)
	s = shapeOf(h, r)
	h.Equal("show of a job never redriven or investigated: redrives and investigations", "redrives=[] investigations=[]",
		fmt.Sprintf("redrives=%s investigations=%s", s.member("redrives"), s.member("investigations")), whyShow)
	expectJob(h, "show", s, "owner", "lease_until")
	auditShapes(h)
}

// auditShapes: redrive, investigate and stats after them.
func auditShapes(h *harness.Harness) {
	h.Clause("§3.redrive.json", "§3.json.redrive")
	d := h.Redrive("s-1", "T-1", t0+1)
	h.ExpectExit("redrive s-1", 0, d.Run, "s-1 is dead")
	s := shapeOf(h, d.Run)
	expectJob(h, "redrive", s, "reason", "owner", "lease_until")
	expectMembers(h, "redrive: redrive", s.sub("redrive"), redriveKeys, "CONTRACT §3: REDRIVE is {job_id, prev_token, prev_reason, at_ms, note}")
	h.Clause("§3.investigate.json")
	v := h.Investigate("s-1", "T-2", t0+2)
	h.ExpectExit("investigate s-1", 0, v.Run, "s-1 exists")
	expectMembers(h, "investigate: investigation", shapeOf(h, v.Run).sub("investigation"), []string{"job_id", "at_ms", "note"},
		"CONTRACT §3: investigate prints {\"investigation\":{job_id, at_ms, note}}")
	h.Clause("§3.stats.json")
	statsShape(h, "stats with one pending job", "pending=1 leased=0 done=0 dead=0; permanent=0 exhausted=0 deadline=0")
}

// oneLine checks that each run's stdout is one JSON object and one newline.
func oneLine(h *harness.Harness, runs ...*harness.Run) {
	h.Clause("§3.json.one")
	for _, r := range runs {
		out := r.Stdout
		h.Check("`"+r.Short()+"`: stdout is one JSON object and one newline",
			strings.HasSuffix(out, "}\n") && strings.Count(out, "\n") == 1 && strings.HasPrefix(out, "{"),
			"{…}\\n", fmt.Sprintf("%q", harness.Trim(out)),
			"CONTRACT §3: with --json stdout is exactly one JSON object and a newline, so a program reads it with one line read")
	}
}

// statsShape checks stats's counts and dead_by_reason, every key present.
func statsShape(h *harness.Harness, what, want string) {
	r := h.Queuectl("stats", -1)
	h.ExpectExit("`queuectl stats` ("+what+")", 0, r, "stats only reads")
	var st struct {
		Counts       map[string]int64 `json:"counts"`
		DeadByReason map[string]int64 `json:"dead_by_reason"`
	}
	h.Parse(r, &st)
	h.Equal(what+": counts and dead_by_reason", want,
		fmt.Sprintf("pending=%s leased=%s done=%s dead=%s; permanent=%s exhausted=%s deadline=%s",
			key(st.Counts, "pending"), key(st.Counts, "leased"), key(st.Counts, "done"), key(st.Counts, "dead"),
			key(st.DeadByReason, "permanent"), key(st.DeadByReason, "exhausted"), key(st.DeadByReason, "deadline")),
		"CONTRACT §3: stats counts every state and every reason, a count of zero included: a dashboard or alert that reads a missing key sees nothing rather than 0")
}
