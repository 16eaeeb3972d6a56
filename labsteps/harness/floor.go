package harness

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"time"

	"snacklab/labsteps/result"
)

// Floor is what a run's process starts and commits cost on this machine: the
// time no implementation of the contract can go below while running the same
// story with the same processes.
type Floor struct {
	Procs, Commits int           // what the run needed
	Start, Commit  time.Duration // one process start; one commit beyond it (medians)
	Samples        int
	Serial         time.Duration // Procs×Start + Commits×Commit
	Cores          int
	Parallel       time.Duration // Serial spread over the cores
	Waits          time.Duration // real-clock waits (step 8's short lease) the run made
}

// MeasureFloor times a trivial process start (`queuectl backoff`) and a
// one-commit process (`queuectl enqueue`) on this machine, now, and prices
// the processes and commits results needed.
func MeasureFloor(ctx context.Context, bin, workRoot string, results []result.Result) (Floor, error) {
	const n = 15
	f := Floor{Samples: n, Cores: runtime.NumCPU()}
	for _, r := range results {
		f.Procs += r.Procs
		f.Commits += r.Commits
		f.Waits += r.Waits
	}
	dir, err := os.MkdirTemp(workRoot, "snacklab-floor-*")
	if err != nil {
		return f, err
	}
	defer os.RemoveAll(dir)
	q := filepath.Join(bin, "queuectl")
	db := filepath.Join(dir, "queue.db")
	timeIt := func(args ...string) (time.Duration, error) {
		t := time.Now()
		out, err := exec.CommandContext(ctx, q, args...).CombinedOutput()
		if err != nil {
			return 0, fmt.Errorf("%s: %v: %s", cmdline("queuectl", args), err, out)
		}
		return time.Since(t), nil
	}
	if _, err := timeIt("init", "--db", db); err != nil {
		return f, err
	}
	var starts, enqs []time.Duration
	for i := range n {
		d, err := timeIt("backoff", "--id", "o-1", "--attempt", "1")
		if err != nil {
			return f, err
		}
		starts = append(starts, d)
		d, err = timeIt("enqueue", "--db", db, "--id", "o-"+strconv.Itoa(i), "--qty", "7", "--now-ms", "1000")
		if err != nil {
			return f, err
		}
		enqs = append(enqs, d)
	}
	f.Start = medianDur(starts)
	f.Commit = max(0, medianDur(enqs)-f.Start)
	f.Serial = time.Duration(f.Procs)*f.Start + time.Duration(f.Commits)*f.Commit
	f.Parallel = f.Serial / time.Duration(f.Cores)
	return f, nil
}

func medianDur(ds []time.Duration) time.Duration {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}
