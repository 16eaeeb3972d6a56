package main_test

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestInterruptedRunIsNotJudged sends the lab the signals a learner's
// Ctrl-C and a CI runner's stop send, once every step has started: what
// ran is reported INTERRUPTED (not judged), never TIMEOUT or FAIL; the
// exit is 128 + the signal; no work dir is left behind.
func TestInterruptedRunIsNotJudged(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			work := t.TempDir()
			cmd := exec.Command(filepath.Join(bin, "lab"), "run", "--bin", bin, "--work", work, "6", "7", "8")
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			var errb bytes.Buffer
			cmd.Stderr = &errb
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			// The lab announces its steps once calibrated; every step's
			// work dir exists soon after. Send the signal once all three do.
			r := bufio.NewReader(stdout)
			var out strings.Builder
			for !strings.Contains(out.String(), "snacklab lab:") {
				line, err := r.ReadString('\n')
				out.WriteString(line)
				if err != nil {
					cmd.Wait()
					t.Fatalf("the lab ended before announcing its steps: %v\n%s%s", err, out.String(), errb.String())
				}
			}
			deadline := time.Now().Add(2 * time.Minute)
			for {
				dirs, _ := filepath.Glob(filepath.Join(work, "snacklab-step*"))
				if len(dirs) == 3 {
					break
				}
				if time.Now().After(deadline) {
					cmd.Process.Kill()
					cmd.Wait()
					t.Fatalf("the steps' work dirs never appeared: %v", dirs)
				}
				time.Sleep(20 * time.Millisecond) // polling for the dirs, not waiting for readiness
			}
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			rest, _ := io.ReadAll(r)
			out.Write(rest)
			err = cmd.Wait()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 128+int(sig) {
				t.Fatalf("lab after %v: got %v, want exit %d\n%s%s", sig, err, 128+int(sig), out.String(), errb.String())
			}
			for _, line := range strings.Split(out.String(), "\n") {
				if strings.HasPrefix(line, "TIMEOUT") || strings.HasPrefix(line, "FAIL") {
					t.Errorf("after %v, a step was judged: %q (want INTERRUPTED or PASS)\n%s", sig, line, out.String())
				}
			}
			if !strings.Contains(out.String(), "INTERRUPTED") {
				t.Errorf("after %v: no step says INTERRUPTED:\n%s", sig, out.String())
			}
			if !strings.Contains(errb.String(), "interrupted by") {
				t.Errorf("stderr after %v: got %q, want it to say the run was interrupted", sig, errb.String())
			}
			left, _ := os.ReadDir(work)
			if len(left) > 0 {
				var names []string
				for _, e := range left {
					names = append(names, e.Name())
				}
				t.Errorf("after %v, work dirs left behind: %v", sig, names)
			}
		})
	}
}
