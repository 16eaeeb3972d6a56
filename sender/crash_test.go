package sender_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"snacklab/queue"
)

// helperEnv selects a helper role when this test binary is re-executed.
const helperEnv = "SNACKLAB_HELPER"

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) == "enqueue" {
		os.Exit(enqueueHelper())
	}
	os.Exit(m.Run())
}

// enqueueHelper enqueues one job into SNACKLAB_DB, says "enqueued" and then
// waits, never closing the queue, until it is killed or its stdin closes.
func enqueueHelper() int {
	qty, err := strconv.ParseInt(os.Getenv("SNACKLAB_QTY"), 10, 64)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	q, err := queue.Open(os.Getenv("SNACKLAB_DB"), queue.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	nj := queue.NewJob{ID: os.Getenv("SNACKLAB_ID"), Qty: qty, MaxAttempts: 5, DeadlineWindowMs: 86_400_000}
	if _, _, err := q.Enqueue(context.Background(), nj, now); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println("enqueued")
	io.Copy(io.Discard, os.Stdin)
	return 0
}

// TestEnqueueSurvivesSIGKILL kills a process the moment Enqueue has returned:
// durable acceptance means the job is on disk by then, with its qty.
func TestEnqueueSurvivesSIGKILL(t *testing.T) {
	for round := range 5 {
		t.Run(fmt.Sprintf("round %d", round), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "queue.db")
			q, err := queue.Open(path, queue.Options{Create: true})
			if err != nil {
				t.Fatal(err)
			}
			q.Close()
			id, qty := fmt.Sprintf("o-%d", round), int64(100+round)

			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), helperEnv+"=enqueue", "SNACKLAB_DB="+path,
				"SNACKLAB_ID="+id, "SNACKLAB_QTY="+strconv.FormatInt(qty, 10))
			cmd.Stderr = os.Stderr
			stdin, err := cmd.StdinPipe()
			if err != nil {
				t.Fatal(err)
			}
			defer stdin.Close()
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			line, err := bufio.NewReader(stdout).ReadString('\n')
			if err != nil {
				cmd.Process.Kill()
				cmd.Wait()
				t.Fatalf("helper said %q: %v", line, err)
			}
			if got, want := line, "enqueued\n"; got != want {
				t.Fatalf("helper said %q, want %q", got, want)
			}
			if err := cmd.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			if err := cmd.Wait(); err == nil {
				t.Fatal("helper exited cleanly, want killed")
			}

			q, err = queue.Open(path, queue.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer q.Close()
			job, err := q.Get(context.Background(), id)
			if err != nil {
				t.Fatalf("after SIGKILL: %v", err)
			}
			if got, want := job.Qty, qty; got != want {
				t.Errorf("qty = %d, want %d", got, want)
			}
			if got, want := job.State, queue.Pending; got != want {
				t.Errorf("state = %s, want %s", got, want)
			}
		})
	}
}
