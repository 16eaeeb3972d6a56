package queue_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"snacklab/internal/powercut"
	"snacklab/queue"
)

// helperEnqueueEnv makes TestHelperEnqueue the process the power-cut test
// records: it enqueues one order in the queue at this path and prints its
// acceptance.
const helperEnqueueEnv = "SNACKLAB_QUEUE_TEST_ENQUEUE"

func TestHelperEnqueue(t *testing.T) {
	path := os.Getenv(helperEnqueueEnv)
	if path == "" {
		t.Skip("the process TestAcceptanceSurvivesAPowerCut records")
	}
	q, err := queue.Open(path, queue.Options{})
	if err == nil {
		_, _, err = q.Enqueue(context.Background(), queue.NewJob{ID: "o-1", Qty: 7, MaxAttempts: 5, DeadlineWindowMs: 60_000}, t0)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println("accepted")
	q.Close()
	os.Exit(0)
}

// Once the acceptance is printed, nothing the commit wrote, created or
// deleted may still be lost by a power cut: every write synced, and the
// journal's deletion synced to the directory (synchronous=EXTRA; FULL
// leaves the unlink in flight, and the journal can come back hot).
func TestAcceptanceSurvivesAPowerCut(t *testing.T) {
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(root, "q.db")
	q, err := queue.Open(path, queue.Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	q.Close()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	out, err := os.Create(filepath.Join(t.TempDir(), "stdout"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	p, err := powercut.Start([]string{exe, "-test.run=^TestHelperEnqueue$"}, powercut.Options{Root: root, Stdout: out,
		Env: append(os.Environ(), helperEnqueueEnv+"="+path)})
	if errors.Is(err, powercut.ErrNoPtrace) || errors.Is(err, syscall.EPERM) {
		if os.Getenv("SNACKLAB_REQUIRE_STRACE") != "" {
			t.Fatalf("SNACKLAB_REQUIRE_STRACE is set but %v", err)
		}
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	rec, err := p.Wait()
	if err != nil || rec.Code != 0 {
		t.Fatalf("the enqueuing process: %v, exit %d %s", err, rec.Code, rec.Signal)
	}
	m, err := powercut.NewModel(rec)
	if err != nil {
		t.Fatal(err)
	}
	answered := false
	for bi, b := range m.Barriers {
		for _, i := range b.Answers {
			answered = answered || strings.Contains(string(rec.Ops[i].Data), "accepted")
		}
		if answered && len(b.InFlight) > 0 {
			op := rec.Ops[b.InFlight[0]]
			t.Fatalf("after the acceptance %d operations can still be lost by a power cut, first #%d %s %s:\n%s",
				len(b.InFlight), b.InFlight[0], op.Call, op.Name, m.Picture(powercut.State{Barrier: bi, Fates: make([]powercut.Fate, len(b.InFlight))}))
		}
	}
	if !answered {
		t.Fatal("the recording has no acceptance on stdout")
	}
}
