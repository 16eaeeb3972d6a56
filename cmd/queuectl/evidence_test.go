package main_test

import (
	"strconv"
	"strings"
	"testing"

	"snacklab/internal/ops/opstest"
)

// TestShowAndDeadTellWhyAJobDied: a job that died after a 503, a timeout
// and a BadAck shows all three attempts with their times in `show`, and its
// last evidence in `dead`.
func TestShowAndDeadTellWhyAJobDied(t *testing.T) {
	const at = int64(1_796_000_000_000)
	q, db := opstest.DiedAfterThree(t, at)
	q.Close()
	now := "--now-ms=" + strconv.FormatInt(at+600_000, 10)
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"show", "ev-1", "--db", db, now}, []string{
			"ev-1 qty=", " dead (exhausted) attempts=3/3 token=3\n",
			"  dead at 2026-11-30T00:58:20.000Z (5m00s ago)\n",
			"  attempt #1 retry 503 http at 2026-11-30T00:53:20.000Z (10m00s ago) (token 1)\n",
			"  attempt #2 retry timeout at 2026-11-30T00:54:20.000Z (9m00s ago) (token 2)\n",
			"  attempt #3 undecided 200 badack at 2026-11-30T00:55:20.000Z (8m00s ago) (token 3)\n"}},
		{[]string{"show", "ev-1", "--db", db, now, "--json"}, []string{
			`"attempts":[{"token":1,"attempt":1,"outcome":"retry","status":503,"error":"http","at_ms":1796000000000},` +
				`{"token":2,"attempt":2,"outcome":"retry","status":null,"error":"timeout","at_ms":1796000060000},` +
				`{"token":3,"attempt":3,"outcome":"undecided","status":200,"error":"badack","at_ms":1796000120000}]`}},
		{[]string{"dead", "--db", db, now}, []string{"LAST EVIDENCE", "#3 undecided 200 badack"}},
		{[]string{"dead", "--db", db, now, "--json"}, []string{`"last_attempt":{"token":3,"attempt":3,"outcome":"undecided","status":200,"error":"badack"`}},
	} {
		r := qc(t, c.args...)
		if r.code != 0 {
			t.Fatalf("queuectl %v: exit %d, stderr %q", c.args, r.code, r.stderr)
		}
		for _, w := range c.want {
			if !strings.Contains(r.stdout, w) {
				t.Errorf("queuectl %v: stdout lacks %q:\n%s", c.args, w, r.stdout)
			}
		}
	}
}

// TestFinishEvidenceFlags: --status and --error are checked before the file
// is opened, and a finish keeps them.
func TestFinishEvidenceFlags(t *testing.T) {
	db := t.TempDir() + "/q.db"
	mustQC(t, "init", "--db", db)
	mustQC(t, "enqueue", "--db", db, "--id", "o-1", "--qty", "7", "--now-ms", "1000")
	mustQC(t, "claim", "--db", db, "--owner", "A", "--now-ms", "1000")
	for _, bad := range [][]string{{"--status", "600"}, {"--status", "99"}, {"--error", "boom"}, {"--error", "HTTP"}} {
		r := qc(t, append([]string{"finish", "--db", db, "--id", "o-1", "--token", "1", "--outcome", "retry", "--now-ms", "1001"}, bad...)...)
		if got, want := r.code, 3; got != want {
			t.Errorf("finish %v: exit %d, want %d (stderr %q)", bad, got, want, r.stderr)
		}
	}
	r := qc(t, "finish", "--db", db, "--id", "o-1", "--token", "1", "--outcome", "retry", "--now-ms", "1001", "--status", "503", "--error", "http")
	if r.code != 0 || !strings.Contains(r.stdout, "o-1 is now pending, retried at 1970-01-01T00:00:0") {
		t.Fatalf("finish: exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
	r = qc(t, "attempt", "--db", db, "--id", "o-1", "--token", "1", "--error", "badack", "--now-ms", "1002")
	if got, want := r.code, 12; got != want {
		t.Errorf("attempt on a job no longer leased: exit %d, want %d", got, want)
	}
}
