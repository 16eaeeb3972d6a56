package crash_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"snacklab/internal/crash"
	"snacklab/internal/powercut"
	"snacklab/internal/tier"
	"snacklab/labsteps/mutants"
)

func powerCut(t *testing.T, cfg crash.PowerCutConfig) *crash.PowerCutReport {
	t.Helper()
	rep, err := crash.PowerCut(context.Background(), cfg)
	if errors.Is(err, crash.ErrNoTracing) {
		if os.Getenv("SNACKLAB_REQUIRE_STRACE") != "" {
			t.Fatalf("SNACKLAB_REQUIRE_STRACE is set but %v", err)
		}
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// The reference's enqueue survives every state of the small budget, and
// the report counts them.
func TestPowerCutReferenceEnqueue(t *testing.T) {
	bin := reference(t)
	rep := powerCut(t, crash.PowerCutConfig{Bin: bin, Work: t.TempDir(), Programs: []string{"enqueue"}, Budget: powercut.Small, Seed: 5})
	if !rep.OK {
		var b bytes.Buffer
		rep.WriteText(&b)
		t.Fatalf("the reference broke an invariant:\n%s", b.String())
	}
	p := rep.Programs[0]
	// A commit with EXTRA: barriers before the journal's two fsyncs, the
	// directory's two, the database's, the answer, and the end.
	if p.Barriers < 7 || p.Built < p.Checked || p.Checked < p.Barriers || p.Outcomes < 2 || p.Outcomes > p.Checked {
		t.Errorf("enqueue: %d barriers, %d built, %d checked, %d outcomes: want ≥ 7 barriers, built ≥ checked ≥ barriers, 2 ≤ outcomes ≤ checked",
			p.Barriers, p.Built, p.Checked, p.Outcomes)
	}
	if rep.PerStateS <= 0 || rep.FloorS <= 0 {
		t.Errorf("per state %v s, floor %v s: want both measured", rep.PerStateS, rep.FloorS)
	}
	var js bytes.Buffer
	if err := rep.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	var back crash.PowerCutReport
	if err := json.Unmarshal(js.Bytes(), &back); err != nil || back.Programs[0].Checked != p.Checked || back.Budget.Name != "small" {
		t.Errorf("JSON round trip: %v, %+v", err, back.Programs)
	}
	if r := rep.Result(); !r.Pass || len(r.Checks) != 1 || !strings.Contains(r.Checks[0].What, "seed 5") {
		t.Errorf("Result = pass %v, checks %+v", r.Pass, r.Checks)
	}
}

// A queue that commits with synchronous=FULL (the journal unlinked, the
// directory never synced after it) passes lab crash but loses an accepted
// order to a power cut after the acceptance; the report draws that state.
func TestPowerCutCatchesAnUnsyncedJournalDeletion(t *testing.T) {
	tier.Slow(t)
	root, err := mutants.ModuleRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	src, bin := t.TempDir(), t.TempDir()
	if err := mutants.CopyModule(root, src); err != nil {
		t.Fatal(err)
	}
	q := filepath.Join(src, "queue", "queue.go")
	b, err := os.ReadFile(q)
	if err != nil {
		t.Fatal(err)
	}
	full := strings.NewReplacer(`"&_synchronous=EXTRA&_foreign_keys=1"`, `"&_synchronous=FULL&_foreign_keys=1"`,
		"if syncMode != 3 {", "if syncMode != 2 {").Replace(string(b))
	if strings.Count(full, "FULL&_foreign_keys") != 1 || strings.Count(full, "syncMode != 2") != 1 {
		t.Fatal("queue/queue.go no longer has the pragma and its check this test turns to FULL")
	}
	if err := os.WriteFile(q, []byte(full), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := mutants.BuildPrograms(context.Background(), src, bin); err != nil {
		t.Fatal(err)
	}
	rep := powerCut(t, crash.PowerCutConfig{Bin: bin, Work: t.TempDir(), Programs: []string{"enqueue"}, Budget: powercut.Small, Seed: 5})
	if rep.OK || len(rep.Violations) == 0 {
		t.Fatal("synchronous=FULL survived every power-cut state of enqueue")
	}
	v := rep.Violations[0]
	if v.Invariant != crash.InvAnswered || v.Call != "after the last operation" {
		t.Errorf("first violation %s %s, want %s after the last operation", v.Invariant, v.Call, crash.InvAnswered)
	}
	for _, want := range []string{"unlink q.db-journal", "DROPPED (no sync of the directory after it)", "write stdout"} {
		if !strings.Contains(v.Picture, want) {
			t.Errorf("the picture lacks %q:\n%s", want, v.Picture)
		}
	}
	var html bytes.Buffer
	if err := rep.WriteHTML(&html); err != nil || !strings.Contains(html.String(), "DROPPED (no sync of the directory after it)") {
		t.Errorf("the HTML report (%v) does not draw the state", err)
	}
	// Its replay builds that one state again, and keeps it.
	again := powerCut(t, crash.PowerCutConfig{Bin: bin, Work: t.TempDir(), Programs: []string{"enqueue"}, Budget: powercut.Small,
		Seed: 5, Barrier: v.Barrier, State: v.State})
	if again.OK || again.Programs[0].Built != 1 || again.Work == "" || again.Violations[0].Picture != v.Picture {
		t.Errorf("replay of barrier %d state %d: ok %v, %d built, work %q", v.Barrier, v.State, again.OK, again.Programs[0].Built, again.Work)
	}
}
