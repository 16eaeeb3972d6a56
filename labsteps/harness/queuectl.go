package harness

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"snacklab/labsteps/result"
)

// Job is the JOB object of CONTRACT §3, as queuectl prints it.
type Job struct {
	ID               string  `json:"id"`
	Qty              int64   `json:"qty"`
	State            string  `json:"state"`
	Reason           *string `json:"reason"`
	Attempts         int64   `json:"attempts"`
	MaxAttempts      int64   `json:"max_attempts"`
	Token            int64   `json:"token"`
	Owner            *string `json:"owner"`
	LeaseUntil       *int64  `json:"lease_until"`
	AvailableAt      int64   `json:"available_at"`
	DeadlineAt       int64   `json:"deadline_at"`
	DeadlineWindowMs int64   `json:"deadline_window_ms"`
	CreatedAt        int64   `json:"created_at"`
	UpdatedAt        int64   `json:"updated_at"`

	// Canon is every field of the contract's JOB in one string: two snapshots
	// that differ in any of them, even one a check does not name, differ here.
	Canon string `json:"-"`
}

// UnmarshalJSON keeps the canonical form beside the fields.
func (j *Job) UnmarshalJSON(b []byte) error {
	type plain Job
	var p plain
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	*j = Job(p)
	c, err := json.Marshal(p)
	j.Canon = string(c)
	return err
}

// Fields is every field of the JOB as the contract names them, in one
// string, made from the fields as they are now: a snapshot changed by hand
// (the job a check expects) compares with a job read back in all of them.
func (j Job) Fields() string {
	type plain Job
	p := plain(j)
	p.Canon = ""
	b, _ := json.Marshal(p)
	return string(b)
}

// String is a one-line summary for messages.
func (j Job) String() string {
	s := fmt.Sprintf("%s %s", j.ID, j.State)
	if j.Reason != nil {
		s += "(" + *j.Reason + ")"
	}
	s += fmt.Sprintf(" token=%d attempts=%d/%d", j.Token, j.Attempts, j.MaxAttempts)
	if j.Owner != nil || j.LeaseUntil != nil {
		s += fmt.Sprintf(" owner=%s lease_until=%s", Repr(j.Owner), Repr(j.LeaseUntil))
	}
	return s + fmt.Sprintf(" available_at=%d", j.AvailableAt)
}

// Redrive is the REDRIVE object of CONTRACT §3.
type Redrive struct {
	JobID      string `json:"job_id"`
	PrevToken  int64  `json:"prev_token"`
	PrevReason string `json:"prev_reason"`
	AtMs       int64  `json:"at_ms"`
	Note       string `json:"note"`
}

// qArgs is `VERB --db DB --json [--now-ms NOW] args…`, the arguments of a
// queuectl verb. now < 0 leaves the clock out (the real clock).
func (h *Harness) QueuectlArgs(verb string, now int64, args ...string) []string {
	all := []string{verb, "--db", h.DB, "--json"}
	if now >= 0 {
		all = append(all, "--now-ms", strconv.FormatInt(now, 10))
	}
	return append(all, args...)
}

// q runs queuectl with qArgs.
func (h *Harness) Queuectl(verb string, now int64, args ...string) *Run {
	return h.Exec("queuectl", h.QueuectlArgs(verb, now, args...)...)
}

// Parse decodes the run's stdout into v, failing the step if it is not the one
// JSON object the contract promises.
func (h *Harness) Parse(r *Run, v any) {
	if err := DecodeObject(r.Stdout, v); err != nil {
		h.Check("`"+r.Short()+"` prints one JSON object", false,
			"one JSON object on stdout (CONTRACT §3)",
			fmt.Sprintf("%s with stdout %q (%v); logs %s.*", r.Exit(), Trim(r.Stdout), err, r.Logs),
			"the lab, like any program driving the queue, reads only what the contract prints")
	}
}

func Trim(s string) string {
	s = strings.TrimSpace(s)
	if len(s) > 300 {
		return s[:300] + "…"
	}
	return s
}

// ExpectExit checks a run's exit code (CONTRACT §6).
func (h *Harness) ExpectExit(what string, want int, r *Run, why string) {
	obs := r.Exit()
	if r.Code != want || r.Signal != "" {
		obs += r.StderrHint()
	}
	h.Check(what, r.Code == want && r.Signal == "", "exit "+strconv.Itoa(want), obs, why)
}

// StderrHint quotes what a failed run printed, for a failure message: its
// stderr (the first line, and where the rest is), else its stdout.
func (r *Run) StderrHint() string {
	if s := Trim(r.Stderr); s != "" {
		// A panic's trace or a long story: its first line, and where the rest
		// is, relative to the step's dir: an absolute path names the grading
		// machine, and its length would clip the message differently there.
		if n := strings.Count(strings.TrimSpace(r.Stderr), "\n"); n > 0 {
			return fmt.Sprintf(" (stderr: %s … %d more lines in logs/%s.stderr)", firstLine(r.Stderr), n, filepath.Base(r.Logs))
		}
		return " (stderr: " + s + ")"
	}
	if s := Trim(r.Stdout); s != "" {
		return " (stdout: " + s + ")"
	}
	return ""
}

// mustSucceed fails the step when a setup command does not exit 0.
func (h *Harness) mustSucceed(r *Run, why string) {
	h.ExpectExit("`"+r.Short()+"` succeeds", 0, r, why)
}

// Init creates the queue file with `queuectl init`.
func (h *Harness) Init() {
	r := h.Queuectl("init", -1)
	h.mustSucceed(r, "every step starts from a queue file that only `queuectl init` creates")
	h.Event(result.LaneQueuectl, "action", "init", result.NoClock, false)
}

// Enqueued is the answer to `queuectl enqueue`.
type Enqueued struct {
	Run       *Run `json:"-"`
	Job       Job  `json:"job"`
	Duplicate bool `json:"duplicate"`
}

// Enqueue accepts an order at now. extra are more flags, such as
// "--max-attempts", "2".
func (h *Harness) Enqueue(id string, qty, now int64, extra ...string) Enqueued {
	r := h.Queuectl("enqueue", now, append([]string{"--id", id, "--qty", strconv.FormatInt(qty, 10)}, extra...)...)
	e := Enqueued{Run: r}
	if r.Code == 0 {
		h.Parse(r, &e)
	}
	h.Event(result.LaneQueuectl, "action", fmt.Sprintf("enqueue %s qty %d → %s", id, qty, r.Exit()), now, r.Code != 0)
	return e
}

// MustEnqueue enqueues and fails the step unless it was accepted.
func (h *Harness) MustEnqueue(id string, qty, now int64, extra ...string) Job {
	e := h.Enqueue(id, qty, now, extra...)
	h.mustSucceed(e.Run, "the step needs this order in the queue")
	return e.Job
}

// Claimed is the answer to `queuectl claim`.
type Claimed struct {
	Run     *Run `json:"-"`
	Claimed bool `json:"claimed"`
	Job     Job  `json:"job"`
}

// Claim asks for one due job as owner at now, for leaseMs.
func (h *Harness) Claim(owner string, now, leaseMs int64) Claimed {
	r := h.Queuectl("claim", now, "--owner", owner, "--lease-ms", strconv.FormatInt(leaseMs, 10))
	c := Claimed{Run: r}
	if r.Code == 0 || r.Code == 13 {
		h.Parse(r, &c)
	}
	text := fmt.Sprintf("claim by %s → nothing (%s)", owner, r.Exit())
	if c.Claimed {
		text = fmt.Sprintf("claim by %s → %s token %d, lease_until %s", owner, c.Job.ID, c.Job.Token, Repr(c.Job.LeaseUntil))
	}
	h.Event(result.LaneQueuectl, "action", text, now, false)
	return c
}

// ClaimAll claims n due jobs at now, one claim each, and fails the step unless
// every claim got a job and no job came twice. It returns the jobs by id.
func (h *Harness) ClaimAll(owner string, n int, now, leaseMs int64) map[string]Job {
	held := map[string]Job{}
	for range n {
		c := h.Claim(owner, now, leaseMs)
		h.ExpectExit(fmt.Sprintf("claim at %d while jobs are due", now), 0, c.Run,
			fmt.Sprintf("%d jobs are due and none is leased", n))
		held[c.Job.ID] = c.Job
	}
	h.Equal(fmt.Sprintf("%d claims got %d different jobs", n, n), n, len(held),
		"one claim hands out one job; a job already leased is not handed out again")
	return held
}

// Finished is the answer to `queuectl finish`.
type Finished struct {
	Run     *Run `json:"-"`
	Applied bool `json:"applied"`
	Job     *Job `json:"job"`
}

// Finish reports an outcome for id under token at now.
func (h *Harness) Finish(id string, token int64, outcome string, now int64) Finished {
	r := h.Queuectl("finish", now, "--id", id, "--token", strconv.FormatInt(token, 10), "--outcome", outcome)
	f := Finished{Run: r}
	if r.Code == 0 || r.Code == 12 {
		h.Parse(r, &f)
	}
	text := fmt.Sprintf("finish %s token %d %s → ", id, token, outcome)
	if f.Applied && f.Job != nil {
		text += "applied, " + f.Job.State
	} else {
		text += "not applied (" + r.Exit() + ")"
	}
	h.Event(result.LaneQueuectl, "action", text, now, !f.Applied)
	return f
}

// Redriven is the answer to `queuectl redrive`.
type Redriven struct {
	Run     *Run    `json:"-"`
	Job     Job     `json:"job"`
	Redrive Redrive `json:"redrive"`
}

// Redrive asks to send a dead job back with a note.
func (h *Harness) Redrive(id, note string, now int64) Redriven {
	r := h.Queuectl("redrive", now, "--id", id, "--note="+note)
	d := Redriven{Run: r}
	if r.Code == 0 {
		h.Parse(r, &d)
	}
	h.Event(result.LaneQueuectl, "action", fmt.Sprintf("redrive %s → %s", id, r.Exit()), now, r.Code != 0)
	return d
}

// Shown is the answer to `queuectl show`.
type Shown struct {
	Run            *Run            `json:"-"`
	Job            Job             `json:"job"`
	Redrives       []Redrive       `json:"redrives"`
	Investigations []Investigation `json:"investigations"`
	// Attempts is the evidence of each attempt (CONTRACT §3 finish
	// evidence); nil when the implementation prints no "attempts" key.
	Attempts *[]Attempt `json:"attempts"`
}

// Attempt is one attempt's evidence as `queuectl show` prints it.
type Attempt struct {
	Token   int64   `json:"token"`
	Attempt int64   `json:"attempt"`
	Outcome string  `json:"outcome"`
	Status  *int64  `json:"status"`
	Error   *string `json:"error"`
	AtMs    int64   `json:"at_ms"`
}

// String is the attempt as a check compares it: "#2 retry 503 http at 10010".
func (a Attempt) String() string {
	return fmt.Sprintf("#%d token %d %s %s %s at %d", a.Attempt, a.Token, a.Outcome, Repr(a.Status), Repr(a.Error), a.AtMs)
}

// Show reads a job and its history with a fresh process.
func (h *Harness) Show(id string) Shown {
	r := h.Queuectl("show", -1, "--id", id)
	s := Shown{Run: r}
	if r.Code == 0 {
		h.Parse(r, &s)
	}
	return s
}

// MustShow reads a job that must exist.
func (h *Harness) MustShow(id string) Shown {
	s := h.Show(id)
	h.ExpectFound(id, s.Run)
	return s
}

// ExpectFound checks that `queuectl show --id ID` found the job.
func (h *Harness) ExpectFound(id string, r *Run) {
	h.ExpectExit("`queuectl show --id "+id+"` finds the job", 0, r,
		"no path may delete a job: its id and qty are the evidence of what happened to the order")
}

// BackoffCase is one question to `queuectl backoff`.
type BackoffCase struct {
	ID      string
	Attempt int
}

// BackoffAnswer is `queuectl backoff --json`'s answer (CONTRACT §3).
type BackoffAnswer struct {
	ID      string `json:"id"`
	Attempt int    `json:"attempt"`
	DelayMs int64  `json:"delay_ms"`
}

// Backoffs asks `queuectl backoff --json` about each case, all at once, and
// returns the answers in the cases' order.
func (h *Harness) Backoffs(cases []BackoffCase) []BackoffAnswer {
	cmds := make([][]string, len(cases))
	for i, c := range cases {
		cmds[i] = []string{"queuectl", "backoff", "--json", "--id", c.ID, "--attempt", strconv.Itoa(c.Attempt)}
	}
	runs := h.ExecAll(cmds)
	out := make([]BackoffAnswer, len(cases))
	for i, r := range runs {
		h.mustSucceed(r, "the backoff is part of the contract so that a grader, or a learner with a pencil, can predict every retry")
		h.Parse(r, &out[i])
	}
	return out
}

// MustFinish reports an outcome that must be applied and returns the job after it.
func (h *Harness) MustFinish(id string, token int64, outcome string, now int64) *Job {
	f := h.Finish(id, token, outcome, now)
	what := fmt.Sprintf("finish %s with token %d (%s) is applied", id, token, outcome)
	why := "this token is the job's current lease, so its outcome must be recorded"
	h.ExpectExit(what, 0, f.Run, why)
	h.Check(what, f.Applied && f.Job != nil, `{"applied":true,"job":{…}}`, Trim(f.Run.Stdout), why)
	return f.Job
}

// ExpectNotApplied checks that a finish was refused (exit 12, applied false)
// and that the job is exactly as it was.
func (h *Harness) ExpectNotApplied(what string, f Finished, before Job, why string) {
	h.ExpectExit(what+": exit code", 12, f.Run, why)
	h.Equal(what+": applied", false, f.Applied, why)
	after := h.MustShow(before.ID).Job
	h.Equal(what+": the job is unchanged", before.Canon, after.Canon, why)
}

// UseQueue points the queuectl verbs and later senders at another queue file
// in the work dir (each variant of a step gets its own).
func (h *Harness) UseQueue(name string) {
	h.DB = filepath.Join(h.Dir, name)
}

// ShowAll reads several jobs at once with fresh processes.
func (h *Harness) ShowAll(ids ...string) map[string]Shown {
	cmds := make([][]string, len(ids))
	for i, id := range ids {
		cmds[i] = append([]string{"queuectl"}, h.QueuectlArgs("show", -1, "--id", id)...)
	}
	out := map[string]Shown{}
	for i, r := range h.ExecAll(cmds) {
		s := Shown{Run: r}
		h.ExpectFound(ids[i], r)
		h.Parse(r, &s)
		out[ids[i]] = s
	}
	return out
}

// Investigated is the answer to `queuectl investigate`.
type Investigated struct {
	Run           *Run          `json:"-"`
	Investigation Investigation `json:"investigation"`
}

// Investigation is an investigations row of CONTRACT §2, as show and
// investigate print it.
type Investigation struct {
	JobID string `json:"job_id"`
	AtMs  int64  `json:"at_ms"`
	Note  string `json:"note"`
}

// Investigate records that someone looked at id, under a ticket note.
func (h *Harness) Investigate(id, note string, now int64) Investigated {
	r := h.Queuectl("investigate", now, "--id", id, "--note="+note)
	v := Investigated{Run: r}
	if r.Code == 0 {
		h.Parse(r, &v)
	}
	h.Event(result.LaneQueuectl, "action", fmt.Sprintf("investigate %s → %s", id, r.Exit()), now, r.Code != 0)
	return v
}

// Call is one queuectl invocation for Calls: a verb, its clock (-1 for none)
// and its flags.
type Call struct {
	Verb string
	Now  int64
	Args []string
}

// CallsInTurn runs queuectl invocations one after the other and returns their
// runs. Writers go in turn: the contract asks only claim to be one immediate
// transaction, so two enqueues at once may meet a lock a correct program is
// allowed to give up on, and that is not what these checks are about.
func (h *Harness) CallsInTurn(calls []Call) []*Run {
	runs := make([]*Run, len(calls))
	for i, c := range calls {
		runs[i] = h.Queuectl(c.Verb, c.Now, c.Args...)
	}
	return runs
}

// Calls runs independent queuectl invocations at once and returns their runs
// in order. Use it only where the order between them cannot matter, and for
// commands that write nothing or only claim (see CallsInTurn).
func (h *Harness) Calls(calls []Call) []*Run {
	cmds := make([][]string, len(calls))
	for i, c := range calls {
		cmds[i] = append([]string{"queuectl"}, h.QueuectlArgs(c.Verb, c.Now, c.Args...)...)
	}
	return h.ExecAll(cmds)
}

// Refusal is one invocation the contract refuses, and the exit code it must
// give (CONTRACT §6).
type Refusal struct {
	What string // what is refused, for the check: "qty 0"
	Call
	Code int
	Why  string
}

// FileState is the queue file's content, for telling whether a command wrote.
// The header's change counters (bytes 24–27 and 92–99) are left out: they
// count commits, not content, and some drivers bump them on an empty commit.
type FileState struct {
	path string
	b    []byte
}

// Snapshot reads the queue file now.
func (h *Harness) Snapshot() FileState {
	b, err := ReadNoFollow(h.DB)
	if err != nil {
		h.Fatalf("the harness reads the queue file", "the file is readable", "the step compares it before and after refused commands", "%v", err)
	}
	for _, r := range [][2]int{{24, 28}, {92, 100}} {
		if len(b) >= r[1] {
			clear(b[r[0]:r[1]])
		}
	}
	return FileState{path: h.DB, b: b}
}

// ExpectRefused runs refusals at once (they must not depend on each other),
// then checks each one's exit code, that it printed nothing on stdout, and
// that together they left the queue file byte for byte as it was. known is
// the step's latest view of its jobs (may be nil), to say which one changed if
// the file did.
func (h *Harness) ExpectRefused(rs []Refusal, known map[string]Shown) {
	h.expectRefused(rs, known, h.Calls)
}

// ExpectRefusedInTurn is ExpectRefused for refusals that must look at a job
// first (a conflict, a redrive of a job in the wrong state): they run one after
// the other, so that none of them waits on another's lock on a busy machine.
func (h *Harness) ExpectRefusedInTurn(rs []Refusal, known map[string]Shown) {
	h.expectRefused(rs, known, h.CallsInTurn)
}

func (h *Harness) expectRefused(rs []Refusal, known map[string]Shown, run func([]Call) []*Run) {
	before := h.Snapshot()
	calls := make([]Call, len(rs))
	for i, r := range rs {
		calls[i] = r.Call
	}
	runs := run(calls)
	for i, r := range rs {
		h.ExpectExit(fmt.Sprintf("`queuectl %s` with %s is refused", r.Verb, r.What), r.Code, runs[i], r.Why)
		h.Check(fmt.Sprintf("…and prints nothing on stdout (%s)", r.What), runs[i].Stdout == "",
			"empty stdout: the error is one line on stderr (CONTRACT §3)", fmt.Sprintf("stdout %q", Trim(runs[i].Stdout)),
			"a program reading stdout must never mistake an error for an answer")
	}
	h.ExpectUnchanged(before, known, "refused commands write nothing (CONTRACT §6: no program writes anything when it exits 2–11)",
		describeCalls(calls))
}

// ExpectNoWrite runs calls that must change nothing (duplicates) in turn,
// returns their runs, and checks the queue file is as it was (known as for
// ExpectRefused).
func (h *Harness) ExpectNoWrite(why string, calls []Call, known map[string]Shown) []*Run {
	before := h.Snapshot()
	runs := h.CallsInTurn(calls)
	h.ExpectUnchanged(before, known, why, describeCalls(calls))
	return runs
}

func describeCalls(calls []Call) string {
	var b strings.Builder
	for i, c := range calls {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(c.Verb + " " + strings.Join(c.Args, " "))
	}
	return b.String()
}

// ExpectUnchanged compares the queue file with before and, if it changed,
// says which of jobs changed and how.
func (h *Harness) ExpectUnchanged(before FileState, jobs map[string]Shown, why, ran string) {
	after := h.Snapshot()
	if bytes.Equal(before.b, after.b) {
		h.Check("the queue file is unchanged, byte for byte", true, "", "unchanged", why)
		return
	}
	ids := make([]string, 0, len(jobs))
	for id := range jobs {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	var diffs []string
	if len(ids) > 0 {
		now := h.ShowAll(ids...)
		for _, id := range ids {
			b, a := jobs[id], now[id]
			if b.Job.Canon != a.Job.Canon || len(b.Redrives) != len(a.Redrives) || len(b.Investigations) != len(a.Investigations) {
				diffs = append(diffs, fmt.Sprintf("%s was %s (redrives %d, investigations %d) and is now %s (redrives %d, investigations %d)",
					id, b.Job.Canon, len(b.Redrives), len(b.Investigations), a.Job.Canon, len(a.Redrives), len(a.Investigations)))
			}
		}
	}
	obs := "the file's content changed"
	if len(diffs) > 0 {
		obs += ": " + strings.Join(diffs, "; ")
	} else if len(ids) > 0 {
		obs += " (no job's fields did: a row was added somewhere, such as an audit row or a new job)"
	}
	h.Check("the queue file is unchanged, byte for byte", false, "the same content after: "+ran, obs, why)
}

// MakeSQLite creates h.DB as a SQLite file holding what script makes: a file
// that is SQLite but not a queue.
func (h *Harness) MakeSQLite(script string) {
	abs, _ := filepath.Abs(h.DB)
	// A new file, handed to the judged: nothing planted at the name is
	// opened (SQLite would follow a symlink).
	err := h.WriteScratch(abs, nil)
	if err == nil {
		err = h.execSQL("file:"+(&url.URL{Path: abs}).EscapedPath()+"?mode=rw", script)
	}
	if err != nil {
		h.Fatalf("the harness makes a SQLite file that is not a queue", "the file is made", "the step checks that it is refused", "%v", err)
	}
}
