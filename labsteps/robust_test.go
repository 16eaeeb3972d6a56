package labsteps_test

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"snacklab/internal/tier"
	"snacklab/labsteps"
	"snacklab/labsteps/harness"
	"snacklab/labsteps/result"
	"snacklab/labsteps/systrace"
)

// shimSource is a version manager's shim (as pyenv, rbenv, asdf and nvm
// install one on PATH for each interpreter): a shell script that works out
// which interpreter to run through command substitutions, each of which
// writes to a pipe of the shim's own, does some more shell work (forks), and
// then execs the interpreter with the script. Here the "interpreter" runs
// the program named on the script's second line, after the delay in seconds
// on its third (an interpreter's own start). Every command line it runs is
// appended to $SNACKSHIM_LOG.
const shimSource = `#!/bin/sh
set -e
self=$(readlink -f "$0")
root=$(dirname "$self")
rl=$(command -v readlink)
version=$(cat "$root/version" 2>/dev/null || echo system)
i=0
while [ "$i" -lt 10 ]; do i=$(expr "$i" + 1); done
script=$1
shift
target=$(sed -n 2p "$script")
delay=$(sed -n 3p "$script")
if [ -n "$delay" ]; then sleep "$delay"; fi
if [ -n "$SNACKSHIM_LOG" ]; then
	printf '%s %s\n' "$(basename "$script")" "$*" >>"$SNACKSHIM_LOG"
fi
exec "$target" "$@"
`

// shimStart is how much later than the reference each program starts
// through the shim, beside the shim's own forks: 100 to 400 ms, an
// interpreter's start (issue #33).
var shimStart = map[string]string{"queuectl": "0.1", "sender": "0.4", "receiver": "0.25"}

// shimBin writes a bin directory whose programs start with
// "#!/usr/bin/env snackshim", and a directory holding the shim, which the
// caller puts on PATH.
func shimBin(t *testing.T, bin string) (progs, shims string) {
	t.Helper()
	progs, shims = t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(shims, "snackshim"), []byte(shimSource), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, p := range labsteps.Programs {
		script := "#!/usr/bin/env snackshim\n" + filepath.Join(bin, p) + "\n" + shimStart[p] + "\n"
		if err := os.WriteFile(filepath.Join(progs, p), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return progs, shims
}

// A correct implementation launched through "#!/usr/bin/env NAME", where
// NAME on PATH is a version manager's shim whose command substitutions write
// to pipes of its own (and which starts slowly: it forks a dozen times and
// then waits 100 to 400 ms, an interpreter's start, before the program
// runs), beside two CPU-bound processes, passes every step or is not graded
// (a wait ran out on the loaded machine) — never failed (issue #33): its
// output is the pipe the lab gave it, whichever process of the traced tree
// writes it. And every sender the steps run without judging its timeout
// (all of steps 2, 7 and 8) was given a --timeout-ms no slow machine can
// run out within the step.
func TestShimmedImplementationPasses(t *testing.T) {
	tier.Slow(t)
	if testing.Short() {
		t.Skip("runs the whole lab through a shim")
	}
	if err := systrace.Available(); err != nil {
		t.Skip(err)
	}
	progs, shims := shimBin(t, refBin)
	log := filepath.Join(t.TempDir(), "shim.log")
	t.Setenv("PATH", shims+string(os.PathListSeparator)+os.Getenv("PATH"))
	t.Setenv("SNACKSHIM_LOG", log)
	busyLoops(t, 2)
	c := labsteps.Config{Bin: progs, WorkRoot: t.TempDir()}
	verdicts := map[result.Verdict]int{}
	for _, r := range labsteps.RunSteps(context.Background(), c, labsteps.Steps(), nil) {
		v := r.Verdict()
		verdicts[v]++
		switch {
		case v == result.Pass:
		case v == result.Timeout || v == result.Interrupted:
			t.Logf("step %d %s through the shim (not graded, allowed on a loaded machine):\n%s", r.Step.Num, v, r.Detail())
		default:
			t.Errorf("step %d %s through the shim:\n%s", r.Step.Num, v, r.Detail())
		}
	}
	t.Logf("verdicts through the shim beside two busy loops: %v", verdicts)
	if verdicts[result.Pass] == 0 {
		t.Errorf("no step passed through the shim (%v): the test judged nothing", verdicts)
	}
	senders := 0
	for _, line := range readLines(t, log) {
		prog, args, _ := strings.Cut(line, " ")
		step := stepOf(args)
		if prog != "sender" || (step != 2 && step != 7 && step != 8) {
			continue
		}
		senders++
		if ms := flagValue(args, "--timeout-ms"); ms < time.Minute.Milliseconds() {
			t.Errorf("step %d ran `sender %s` with --timeout-ms %d, want at least a minute: the step does not judge it", step, args, ms)
		}
	}
	if senders < 10 {
		t.Errorf("the shim logged %d senders in steps 2, 7 and 8, want at least 10: the test looked at nothing", senders)
	}
}

func readLines(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	return lines
}

// stepOf is the step whose work dir (snacklab-stepN-…) args name, 0 if none.
func stepOf(args string) int {
	_, rest, ok := strings.Cut(args, "snacklab-step")
	if !ok || rest == "" {
		return 0
	}
	n, _ := strconv.Atoi(rest[:1])
	return n
}

// flagValue is the value of flag in args (space-separated), -1 if absent.
func flagValue(args, flag string) int64 {
	f := strings.Fields(args)
	for i := range f[:max(0, len(f)-1)] {
		if f[i] == flag {
			n, err := strconv.ParseInt(f[i+1], 10, 64)
			if err == nil {
				return n
			}
		}
	}
	return -1
}

// A machine too slow for the harness to release its lock within a
// process's busy timeout is not a wrong answer: the process that waited its
// whole busy timeout, every attempt refused, ends the check as TIMEOUT, and
// the message says what its trace shows. The slow harness is played by the
// test, which lets the process end before it looks. One that gave up sooner
// than its busy timeout still fails.
func TestTooSlowToReleaseIsTimeout(t *testing.T) {
	if err := systrace.Available(); err != nil {
		t.Skip(err)
	}
	t.Parallel()
	for _, tc := range []struct {
		name    string
		prelude string // run before the real queuectl; "" execs it as it is
		want    result.Verdict
		says    string
	}{
		{"waited out its busy timeout", "", result.Timeout, "it waited out its busy timeout of 300 ms"},
		{"gave up at once", `exec ` + strconv.Quote(filepath.Join(refBin, "queuectl")) + ` "$@" --busy-timeout-ms 1`,
			result.Fail, "before its busy timeout of 300 ms ran out"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			bin := wrapBin(t, refBin, map[string]string{"queuectl": tc.prelude})
			l := result.Limits{Wait: time.Minute, Block: time.Minute, Drain: time.Minute, Step: 5 * time.Minute}
			h := harness.New(context.Background(), t.TempDir(), bin, l)
			if p := h.Do(func(h *harness.Harness) {
				h.Init()
				lock := h.HoldWriteLock()
				enq := h.StartTraced("enqueue", result.LaneQueuectl, "queuectl", 10000, nil, harness.LockCalls,
					append(h.QueuectlArgs("enqueue", 10000, "--id", "o-1", "--qty", "7"), "--busy-timeout-ms", "300")...)
				enq.WaitRefused("enqueue tries the lock", "why")
				enq.Wait("the slow harness looks only once the enqueue has ended")
				h.ExpectWaitsThenSucceeds("enqueue", lock, enq)
			}); p != "" {
				t.Fatal(p)
			}
			var r result.Result
			h.Record(&r)
			c := r.Failed()
			if c == nil {
				t.Fatalf("no failed check; want %s", tc.want)
			}
			t.Logf("%s: %s", c.What, c.Observed)
			if got := map[bool]result.Verdict{true: result.Timeout, false: result.Fail}[c.TimedOut]; got != tc.want {
				t.Errorf("verdict %s, want %s: %s: %s", got, tc.want, c.What, c.Observed)
			}
			for _, want := range []string{tc.says, "by its trace", "the harness still held the lock"} {
				if !strings.Contains(c.Observed, want) {
					t.Errorf("the message does not say %q: %s", want, c.Observed)
				}
			}
		})
	}
}
