package crash

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"time"

	"snacklab/labsteps/harness"
	"snacklab/labsteps/systrace"
)

// What this machine allows and costs: tracing, and one process start.

// probe runs `queuectl backoff` (no file) under the tracer: ptrace may be
// forbidden here (a container without CAP_SYS_PTRACE). strace itself is
// not needed.
// With a judged identity the probe also starts it through the judged-exec
// step, so a lab that cannot change identity fails here, not at a point.
func probe(bin string, j *harness.Judged) error {
	argv, err := j.TracedArgv(filepath.Join(bin, "queuectl"))
	if err != nil {
		return err
	}
	p, err := systrace.KillAt(append(argv, "backoff", "--id", "o-1", "--attempt", "1"), systrace.KillOptions{Dir: os.TempDir(), Env: j.Env()})
	if err != nil {
		return err
	}
	k, err := p.Wait()
	if err == nil && k.Code != 0 {
		err = fmt.Errorf("queuectl backoff under ptrace ended %d %s", k.Code, k.Signal)
	}
	return err
}

// floor is one process start here and now: the median of 5 starts of
// `queuectl backoff`, which opens no file.
func floor(ctx context.Context, bin string, j *harness.Judged) time.Duration {
	w := &world{ctx: ctx, bin: bin, judged: j, accepted: map[string]int64{}, redriveOK: map[string]int{}, redriveKilled: map[string]int{},
		logs: os.TempDir(), cwd: os.TempDir()}
	var ds []time.Duration
	for range 5 {
		t := time.Now()
		w.run("queuectl", "backoff", "--id", "o-1", "--attempt", "1")
		ds = append(ds, time.Since(t))
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	return ds[2]
}
