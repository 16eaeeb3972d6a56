package harness

import (
	"encoding/json"
	"fmt"
	"net/url"
	"path/filepath"
	"reflect"
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

// JSONNames are the JSON member names of a struct's fields, in order
// (fields the JSON leaves out, "-", are not members).
func JSONNames(v any) []string {
	t := reflect.TypeOf(v)
	var names []string
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if name != "" && name != "-" {
			names = append(names, name)
		}
	}
	return names
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

// UseQueue points the queuectl verbs and later senders at another queue file
// in the work dir (each variant of a step gets its own).
func (h *Harness) UseQueue(name string) {
	h.DB = filepath.Join(h.Dir, name)
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
