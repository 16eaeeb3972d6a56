package ops_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"snacklab/internal/ops"
	"snacklab/internal/ops/opstest"
	"snacklab/queue"
)

func collect(t *testing.T, q *queue.Queue, now int64) ops.Report {
	t.Helper()
	r, err := ops.Collect(context.Background(), q, now)
	if err != nil {
		t.Fatalf("collect: %v", err)
	}
	return r
}

// TestReportFigures checks every figure of the report against the fixture's
// hand-worked numbers.
func TestReportFigures(t *testing.T) {
	q, _ := opstest.Known(t)
	r := collect(t, q, opstest.Now)
	if r.OldestDead == nil {
		t.Fatal("oldest dead: nil, want perm-1")
	}
	if r.LastInvestigationMs == nil || r.LastInvestigationAgeMs == nil {
		t.Fatal("last investigation: nil, want 21000")
	}
	for _, c := range []struct {
		name      string
		got, want any
	}{
		{"pending", r.Counts[queue.Pending], int64(opstest.Pending)},
		{"leased", r.Counts[queue.Leased], int64(opstest.Leased)},
		{"done", r.Counts[queue.Done], int64(opstest.Done)},
		{"dead", r.Counts[queue.Dead], int64(opstest.Dead)},
		{"total", r.Total(), int64(14)},
		{"dead permanent", r.DeadByReason[queue.ReasonPermanent], int64(opstest.Permanent)},
		{"dead exhausted", r.DeadByReason[queue.ReasonExhausted], int64(opstest.Exhausted)},
		{"dead deadline", r.DeadByReason[queue.ReasonDeadline], int64(opstest.Deadline)},
		{"ratio permanent", r.DeadRatio[queue.ReasonPermanent], 2.0 / 6},
		{"ratio exhausted", r.DeadRatio[queue.ReasonExhausted], 3.0 / 6},
		{"ratio deadline", r.DeadRatio[queue.ReasonDeadline], 1.0 / 6},
		{"oldest id", r.OldestDead.ID, opstest.OldestID},
		{"oldest reason", r.OldestDead.Reason, opstest.OldestReason},
		{"oldest since", r.OldestDead.SinceMs, int64(opstest.OldestSinceMs)},
		{"oldest age", r.OldestDead.AgeMs, int64(opstest.Now - opstest.OldestSinceMs)},
		{"oldest token", r.OldestDead.Token, int64(1)},
		{"last investigation", *r.LastInvestigationMs, int64(opstest.LastInvestigationMs)},
		{"last investigation age", *r.LastInvestigationAgeMs, int64(opstest.Now - opstest.LastInvestigationMs)},
		{"investigations", r.Investigations, int64(opstest.Investigations)},
		{"redrives", r.Redrives, int64(opstest.Redrives)},
		{"redriven jobs", r.Redriven.Jobs, int64(opstest.RedrivenJobs)},
		{"redriven done", r.Redriven.Done, int64(opstest.RedrivenDone)},
		{"redriven dead", r.Redriven.Dead, int64(opstest.RedrivenDead)},
		{"redriven pending", r.Redriven.Pending, int64(opstest.RedrivenPending)},
		{"redriven leased", r.Redriven.Leased, int64(opstest.RedrivenLeased)},
		{"redriven in flight", r.Redriven.InFlight, int64(opstest.RedrivenInFlight)},
		{"now", r.NowMs, int64(opstest.Now)},
	} {
		if c.got != c.want {
			t.Errorf("%s: got %v, want %v", c.name, c.got, c.want)
		}
	}
}

func TestReportEmptyQueue(t *testing.T) {
	q, _ := opstest.NewFile(t)
	r := collect(t, q, 5000)
	if r.OldestDead != nil || r.LastInvestigationMs != nil {
		t.Fatalf("oldest %v, last investigation %v: want nil, nil", r.OldestDead, r.LastInvestigationMs)
	}
	for _, reason := range queue.Reasons() {
		if got, want := r.DeadRatio[reason], 0.0; got != want {
			t.Errorf("ratio %s: got %v, want %v", reason, got, want)
		}
	}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"oldest_dead":null`, `"last_investigation_at":null`, `"dead_ratio":{"deadline":0,"exhausted":0,"permanent":0}`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("json %s: want %s", b, want)
		}
	}
}

func TestReportJSONHasNoContent(t *testing.T) {
	q, _ := opstest.Known(t)
	b, err := json.Marshal(collect(t, q, opstest.Now))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"counts", "dead_by_reason", "dead_ratio", "oldest_dead", "last_investigation_at", "investigations", "redrives", "redriven"} {
		if _, ok := m[key]; !ok {
			t.Errorf("json lacks %q: %s", key, b)
		}
	}
	if s := string(b); strings.Contains(s, "qty") || strings.Contains(s, opstest.QtyMarker) {
		t.Fatalf("stats json carries order content: %s", s)
	}
}

func TestWriteTable(t *testing.T) {
	q, _ := opstest.Known(t)
	var buf bytes.Buffer
	if err := ops.WriteTable(&buf, collect(t, q, opstest.Now)); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^pending +4$`),
		regexp.MustCompile(`(?m)^dead +6$`),
		regexp.MustCompile(`(?m)^total +14$`),
		regexp.MustCompile(`(?m)^exhausted +3 +0\.500$`),
		regexp.MustCompile(`(?m)^oldest dead: +perm-1 \(permanent\), dead for 1m38s `),
		regexp.MustCompile(`(?m)^last investigation: +1m19s ago .*, 2 in all$`),
		regexp.MustCompile(`(?m)^redrives: +6, of 5 jobs: 1 done since, 1 dead again, 3 in flight \(2 pending, 1 leased\)$`),
	} {
		if !want.MatchString(out) {
			t.Errorf("table lacks %s:\n%s", want, out)
		}
	}
}

var (
	promSample = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[a-z_]+="[a-z_]+"\})? (\S+)$`)
	promMeta   = regexp.MustCompile(`^# (HELP|TYPE) ([a-zA-Z_:][a-zA-Z0-9_:]*) (.+)$`)
)

// parseProm is a strict reader of the text format for what WritePrometheus
// writes: every sample under its own HELP and TYPE, counters named _total.
func parseProm(t *testing.T, text string) map[string]float64 {
	t.Helper()
	samples := map[string]float64{}
	types := map[string]string{}
	helped := map[string]bool{}
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		line := sc.Text()
		if m := promMeta.FindStringSubmatch(line); m != nil {
			if m[1] == "HELP" {
				helped[m[2]] = true
			} else {
				types[m[2]] = m[3]
			}
			continue
		}
		m := promSample.FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("not a sample line: %q", line)
		}
		name := m[1]
		if !helped[name] || types[name] == "" {
			t.Fatalf("sample %q before its HELP and TYPE", line)
		}
		if got := types[name]; (got == "counter") != strings.HasSuffix(name, "_total") {
			t.Errorf("%s is a %s: counters and only counters end in _total", name, got)
		}
		v, err := strconv.ParseFloat(m[3], 64)
		if err != nil {
			t.Fatalf("value of %q: %v", line, err)
		}
		key := name + m[2]
		if _, dup := samples[key]; dup {
			t.Fatalf("duplicate sample %s", key)
		}
		samples[key] = v
	}
	if !strings.HasSuffix(text, "\n") {
		t.Fatal("exposition does not end with a newline")
	}
	return samples
}

func TestWritePrometheus(t *testing.T) {
	q, _ := opstest.Known(t)
	var buf bytes.Buffer
	if err := ops.WritePrometheus(&buf, collect(t, q, opstest.Now)); err != nil {
		t.Fatal(err)
	}
	got := parseProm(t, buf.String())
	want := map[string]float64{
		`snacklab_queue_jobs{state="pending"}`:                4,
		`snacklab_queue_jobs{state="leased"}`:                 2,
		`snacklab_queue_jobs{state="done"}`:                   2,
		`snacklab_queue_jobs{state="dead"}`:                   6,
		`snacklab_queue_dead_jobs{reason="permanent"}`:        2,
		`snacklab_queue_dead_jobs{reason="exhausted"}`:        3,
		`snacklab_queue_dead_jobs{reason="deadline"}`:         1,
		`snacklab_queue_dead_ratio{reason="permanent"}`:       2.0 / 6,
		`snacklab_queue_dead_ratio{reason="exhausted"}`:       0.5,
		`snacklab_queue_dead_ratio{reason="deadline"}`:        1.0 / 6,
		`snacklab_queue_oldest_dead_age_seconds`:              98,
		`snacklab_queue_last_investigation_timestamp_seconds`: 21,
		`snacklab_queue_investigations_total`:                 2,
		`snacklab_queue_redrives_total`:                       6,
		`snacklab_queue_redriven_jobs{result="done"}`:         1,
		`snacklab_queue_redriven_jobs{result="dead"}`:         1,
		`snacklab_queue_redriven_jobs{result="in_flight"}`:    3,
		`snacklab_queue_report_timestamp_seconds`:             100,
	}
	if got, want := len(got), len(want); got != want {
		t.Errorf("samples: got %d, want %d", got, want)
	}
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("%s: got %v (present %v), want %v", k, g, ok, v)
		}
	}
}
