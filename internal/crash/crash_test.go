package crash_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"snacklab/internal/crash"
	"snacklab/internal/tier"
	"snacklab/labsteps/mutants"
)

// reference builds the three executables of this module.
func reference(t *testing.T) string {
	t.Helper()
	bin := t.TempDir()
	build := exec.Command("go", "build", "-o", bin+"/", "snacklab/cmd/queuectl", "snacklab/cmd/sender", "snacklab/cmd/receiver")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v: %s", err, out)
	}
	return bin
}

func run(t *testing.T, cfg crash.Config) *crash.Report {
	t.Helper()
	rep, err := crash.Run(context.Background(), cfg)
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

// The reference survives every crash point of its enqueue and a short
// soak, and the reports say so.
func TestReferenceEnqueue(t *testing.T) {
	bin := reference(t)
	rep := run(t, crash.Config{Bin: bin, Work: t.TempDir(), Programs: []string{"enqueue"}, Seed: 3, Kills: 10})
	if !rep.OK || len(rep.Violations) != 0 {
		var b bytes.Buffer
		rep.WriteText(&b)
		t.Fatalf("the reference broke an invariant:\n%s", b.String())
	}
	// A commit is at least a journal write, its sync, a db write, its sync
	// and the journal's removal.
	if got := len(rep.Points); got < 5 {
		t.Errorf("%d crash points for enqueue, want at least 5", got)
	}
	calls := map[string]bool{}
	for i, p := range rep.Points {
		if p.N != i+1 || p.Program != "enqueue" {
			t.Errorf("point %d = %+v, want enqueue #%d", i, p, i+1)
		}
		calls[p.Call+" "+p.File] = true
	}
	for _, want := range []string{"fsync q.db", "fsync q.db-journal", "unlink q.db-journal"} {
		if !calls[want] {
			t.Errorf("no crash point at %s among %v", want, calls)
		}
	}
	if rep.Programs[0].Durable != "ok" {
		t.Errorf("durable = %q, want ok", rep.Programs[0].Durable)
	}
	if rep.Soak == nil || rep.Soak.Kills != 10 || rep.Soak.Lost+rep.Soak.Doubled+rep.Soak.Integrity != 0 {
		t.Errorf("soak = %+v, want 10 kills, nothing lost", rep.Soak)
	}
	var js, html bytes.Buffer
	if err := rep.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	var back crash.Report
	if err := json.Unmarshal(js.Bytes(), &back); err != nil || len(back.Points) != len(rep.Points) {
		t.Errorf("JSON round trip: %v, %d points", err, len(back.Points))
	}
	if err := rep.WriteHTML(&html); err != nil {
		t.Fatal(err)
	}
	if got := strings.Count(html.String(), "<rect"); got < len(rep.Points) {
		t.Errorf("the picture has %d rects for %d crash points", got, len(rep.Points))
	}
	if r := rep.Result(); !r.Pass || len(r.Checks) != 2 {
		t.Errorf("Result = pass %v with %d checks, want a pass with 2 (enqueue, soak)", r.Pass, len(r.Checks))
	}
}

// In batched delivery (--batch 3) the reference survives every crash point
// of one `sender run-once --batch 3` and a short soak of batched senders:
// the claim, each of the three POSTs and the one finish of three jobs.
func TestReferenceBatchedSender(t *testing.T) {
	tier.Slow(t)
	bin := reference(t)
	rep := run(t, crash.Config{Bin: bin, Work: t.TempDir(), Programs: []string{"sender"}, Batch: 3, Seed: 5, Kills: 10})
	if !rep.OK || len(rep.Violations) != 0 {
		var b bytes.Buffer
		rep.WriteText(&b)
		t.Fatalf("the reference broke an invariant in batched delivery:\n%s", b.String())
	}
	if got, want := rep.Programs[0].Title, "sender run-once --batch 3 (claim 3, POST each, finish 3)"; got != want {
		t.Errorf("title = %q, want %q", got, want)
	}
	sends := 0
	for _, p := range rep.Points {
		if p.File == "socket" {
			sends++
		}
	}
	// Two commits (claim, finish) of at least five crash points each, and a
	// send per POST.
	if got := len(rep.Points); got < 10+3 || sends < 3 {
		t.Errorf("%d crash points, %d of them socket sends; want at least 13 and 3", got, sends)
	}
	if rep.Programs[0].Durable != "ok" {
		t.Errorf("durable = %q, want ok", rep.Programs[0].Durable)
	}
	if rep.Batch != 3 || rep.Soak == nil || rep.Soak.Batch != 3 || rep.Soak.Kills != 10 || !strings.Contains(rep.Soak.Line(), "senders --batch 3") {
		t.Errorf("report batch %d, soak %+v: want both batched by 3, 10 kills", rep.Batch, rep.Soak)
	}
}

// --at replays one crash point and keeps its files.
func TestReplayOnePoint(t *testing.T) {
	bin := reference(t)
	rep := run(t, crash.Config{Bin: bin, Work: t.TempDir(), Programs: []string{"finish"}, Point: 3})
	if len(rep.Points) != 1 || rep.Points[0].N != 3 || rep.Work == "" {
		t.Fatalf("replay of finish #3: points %+v, work %q", rep.Points, rep.Work)
	}
	if _, err := os.Stat(filepath.Join(rep.Work, "finish-003", "data", "q.db")); err != nil {
		t.Errorf("the replayed point's queue file is not kept: %v", err)
	}
}

func TestMutantHeadersNameCrashPrograms(t *testing.T) {
	if !slices.Equal(mutants.CrashPrograms, crash.Programs) {
		t.Errorf("mutants.CrashPrograms = %v, crash.Programs = %v: keep them equal", mutants.CrashPrograms, crash.Programs)
	}
	if _, err := crash.Run(context.Background(), crash.Config{Programs: []string{"queue"}}); err == nil {
		t.Error("Run accepted an unknown program")
	}
}
