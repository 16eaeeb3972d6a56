package isolate

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"snacklab/labsteps"
	"snacklab/labsteps/harness"
)

// A local engine grades inside a boundary someone else made — a Kubernetes
// pod, a VM — where there is no Docker engine: the lab that grades is the
// judge, root with JudgeCaps, and runs each submission's lab as a process
// of its own with the same command line, the same judged identities and
// the same reading of its results as a container's (issue #19: the judge
// and the judged never share an identity, in a pod too). What a container
// adds and a local run has not: its own mount, pid and network namespaces
// and its cgroup limits. The boundary's own (the pod's network policy,
// read-only root, limits) stand for them; see docs/kubernetes.md.
type local struct {
	lab string // this lab's executable: the judge, and its judged helpers

	mu    sync.Mutex
	slots []bool // judged uid blocks in use, one per run going on
}

// LocalJudgedUID is the first uid a local engine hands to the judged: a
// run takes a block of localIDs uids from it (its lab's --judged-uid, and
// the steps' offsets above it, harness.Judged.ForStep), runs going on side
// by side distinct blocks, so that the end of one run's step (which kills
// every process of its uid) ends nothing of another's. Not JudgedUID: a
// local engine's kills reach every process of those uids in its pid
// namespace, and on a machine that also runs grading containers (no user
// namespaces) their programs are host processes of uid JudgedUID and up.
const LocalJudgedUID = 200000

// localIDs is the width of a run's block of judged uids.
const localIDs = 32

// NewLocal is an Engine with no Docker engine (see local): labBin is the
// lab to run for each submission, this process must be root (the judge
// starts the programs as other uids, hands them their directories and
// ends them), and labBin must protect its output as an isolated lab does.
// Close removes nothing: a local run leaves nothing behind.
func NewLocal(ctx context.Context, labBin string) (*Engine, error) {
	if labBin == "" {
		return nil, errors.New("isolate: no lab binary")
	}
	if os.Geteuid() != 0 {
		return nil, fmt.Errorf("isolate: grading in a pod needs the lab to be root with the capabilities %s (it runs as uid %d)", strings.Join(JudgeCaps, ", "), os.Geteuid())
	}
	if err := checkIsolatedLab(ctx, labBin); err != nil {
		return nil, err
	}
	lab, err := os.ReadFile(labBin)
	if err != nil {
		return nil, err
	}
	if carriesMutants(lab) {
		return nil, fmt.Errorf("isolate: %s %w", labBin, ErrCarriesMutants)
	}
	var rnd [4]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return nil, err
	}
	return &Engine{id: hex.EncodeToString(rnd[:]), local: &local{lab: labBin}}, nil
}

// take and give back a block of judged uids.
func (l *local) take() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, used := range l.slots {
		if !used {
			l.slots[i] = true
			return i
		}
	}
	l.slots = append(l.slots, true)
	return len(l.slots) - 1
}

func (l *local) give(i int) {
	l.mu.Lock()
	l.slots[i] = false
	l.mu.Unlock()
}

// run is runOnce for a local engine: the spec's lab command as a process
// of its own, its /sub the staged programs, its /work and /tmp fresh
// directories of its own, the judged uids those of a free block, killed
// with everything of those uids at the wall-clock limit.
func (l *local) run(ctx context.Context, spec containerSpec, wall time.Duration) (res containerResult, err error) {
	slot := l.take()
	defer l.give(slot)
	base := LocalJudgedUID + slot*localIDs
	root, err := os.MkdirTemp("", "snacklab-local-*")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(root)
	paths, err := localLayout(root, spec, base)
	if err != nil {
		return res, err
	}
	cmd := exec.Command(l.lab)
	cmd.Args = localArgs(spec.cmd, l.lab, paths, base)
	cmd.Env = localEnv(spec.env, paths[tmpDir])
	cmd.Dir = root
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdout, stderr := &capped{max: maxStdout}, &capped{max: maxStderr}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	werr, err := waitWithin(ctx, cmd, wall, &res)
	// Whatever the lab left of the judged (at the wall limit, all of it)
	// ends with the run, as a container's processes end with it.
	kerr := l.endJudged(base)
	if err != nil {
		return res, err
	}
	res.code = cmd.ProcessState.ExitCode()
	var exit *exec.ExitError
	if werr != nil && !errors.As(werr, &exit) {
		return res, fmt.Errorf("isolate: the lab: %w", werr)
	}
	if res.wall {
		res.code = -1
	}
	res.stdout, res.stderr = stdout.b.String(), stderr.b.String()
	res.stdoutCut, res.stderrCut = stdout.cut, stderr.cut
	if kerr != nil {
		return res, fmt.Errorf("isolate: ending the judged's processes: %w", kerr)
	}
	return res, nil
}

// localLayout makes a run's directories in root and maps the container's
// paths to them: /work the judge's, passable but not listable (as a
// container's /work), /tmp anyone's in the run (as a container's), and /sub
// the staged programs. root and the staging root let the run's block of
// judged uids (from base) pass, and no other run's: the judged of two
// runs at once see nothing of each other, as two containers.
func localLayout(root string, spec containerSpec, base int) (map[string]string, error) {
	work, tmp := filepath.Join(root, "work"), filepath.Join(root, "tmp")
	if err := passOnly(root, base, localIDs); err != nil {
		return nil, err
	}
	for _, d := range []struct {
		path string
		mode os.FileMode
	}{{work, 0o711}, {tmp, 0o1777}} {
		if err := os.Mkdir(d.path, d.mode); err != nil && !os.IsExist(err) {
			return nil, err
		}
		if err := os.Chmod(d.path, d.mode); err != nil {
			return nil, err
		}
	}
	paths := map[string]string{workDir: work, tmpDir: tmp}
	for _, m := range spec.mounts {
		if m.Target == subDir {
			paths[subDir] = m.Source
			if err := passOnly(filepath.Dir(m.Source), base, localIDs); err != nil {
				return nil, err
			}
		}
	}
	return paths, nil
}

// waitWithin starts cmd (the leader of its process group) and waits for
// it, killing the group at the wall-clock limit (res.wall) or when ctx
// ends (err). werr is what cmd.Wait returned.
func waitWithin(ctx context.Context, cmd *exec.Cmd, wall time.Duration, res *containerResult) (werr, err error) {
	t0 := time.Now()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("isolate: starting the lab: %w", err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	timer := time.NewTimer(wall)
	defer timer.Stop()
	select {
	case werr = <-done:
	case <-timer.C:
		res.wall = true
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		werr = <-done
	case <-ctx.Done():
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
		return nil, fmt.Errorf("isolate: interrupted: %w", ctx.Err())
	}
	res.took = time.Since(t0)
	return werr, nil
}

// endJudged kills every process of the uids a run's lab hands out: the
// block's base (calibration, lab crash) and one above it per step, each
// identity's kill at once.
func (l *local) endJudged(base int) error {
	errs := make([]error, len(labsteps.Steps())+1)
	var wg sync.WaitGroup
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			j := &harness.Judged{UID: uint32(base + i), GID: uint32(base + i), Exec: []string{l.lab, harness.JudgedExecCommand}}
			errs[i] = j.KillAll()
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// localArgs is a container's lab command line for a local run: the lab
// at its own path, the container's paths mapped to the run's, the judged
// ids moved to the run's block.
func localArgs(cmd []string, lab string, paths map[string]string, base int) []string {
	argv := slices.Clone(cmd)
	argv[0] = lab
	for i, a := range argv {
		if p, ok := paths[a]; ok && i > 0 {
			argv[i] = p
		}
		if i > 0 && (argv[i-1] == "--judged-uid" || argv[i-1] == "--judged-gid") && a == strconv.Itoa(JudgedUID) {
			argv[i] = strconv.Itoa(base)
		}
	}
	return argv
}

// localEnv is a container's environment for a local run: its own TMPDIR
// and HOME, and this machine's PATH (strace).
func localEnv(env []string, tmp string) []string {
	var out []string
	for _, kv := range env {
		switch {
		case strings.HasPrefix(kv, "TMPDIR="), strings.HasPrefix(kv, "HOME="), strings.HasPrefix(kv, "PATH="):
		default:
			out = append(out, kv)
		}
	}
	return append(out, "TMPDIR="+tmp, "HOME="+tmp, "PATH="+os.Getenv("PATH"))
}
