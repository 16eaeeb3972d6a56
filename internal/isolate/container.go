package isolate

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	dc "github.com/ory/dockertest/v3/docker"
)

// The containers an Engine makes, a lab run's or a build's: created with
// the isolation every one of them gets, run to their end or the wall-clock
// limit, and read back within bounds.

// containerSpec is what differs between the containers an Engine makes: a
// lab run or a build.
type containerSpec struct {
	name    string
	cmd     []string
	env     []string
	workDir string
	mounts  []dc.HostMount
	tmpfs   map[string]int64 // path → size; noexec
	limits  Limits
	user    string
	caps    []string // added back after dropping all
}

func roBind(src, dst string) dc.HostMount {
	return dc.HostMount{Type: "bind", Source: src, Target: dst, ReadOnly: true,
		BindOptions: &dc.BindOptions{Propagation: "rprivate"}}
}

func rwBind(src, dst string) dc.HostMount {
	return dc.HostMount{Type: "bind", Source: src, Target: dst,
		BindOptions: &dc.BindOptions{Propagation: "rprivate"}}
}

// createContainer creates (not starts) a container of the engine's image
// with no network, a root the judged cannot write (read-only for builds),
// no capabilities, and the spec's
// limits. It returns the container's id whenever one exists, also with an
// error.
func (e *Engine) createContainer(ctx context.Context, sp containerSpec) (string, error) {
	name := fmt.Sprintf("snacklab-isolate-%s-%03d-%s", e.id, e.seq.Add(1), containerSafe(sp.name))
	if err := ctx.Err(); err != nil {
		return "", fmt.Errorf("isolate: creating container %s: %w", name, err)
	}
	// The create call itself is not cancelled with ctx: a request the
	// daemon has received goes on after the client gives up, and a
	// container it creates then has no id here to remove (one was left
	// "created" when a grader was interrupted mid-create). A fresh context
	// lets the call finish and return the id; the caller removes it and
	// reports ctx's end.
	cctx, ccancel := context.WithTimeout(context.WithoutCancel(ctx), apiTimeout)
	defer ccancel()
	l := sp.limits
	tmpfs := map[string]string{}
	for p, size := range sp.tmpfs {
		// /work is the judge's (root's): the judged reach their scratch
		// dirs through it but create nothing in it. /tmp is anyone's.
		mode := "1777"
		if p == workDir && sp.user == JudgeUser {
			mode = "0711"
		}
		tmpfs[p] = "rw,noexec,nosuid,nodev,mode=" + mode + ",size=" + strconv.FormatInt(size, 10)
	}
	const period = 100_000 // µs, the CFS default
	c, err := e.client.CreateContainer(dc.CreateContainerOptions{
		Context: cctx,
		Name:    name,
		Config: &dc.Config{
			Image:           e.image,
			Cmd:             sp.cmd,
			User:            sp.user,
			Env:             sp.env,
			WorkingDir:      sp.workDir,
			NetworkDisabled: true,
			Labels:          map[string]string{LabelEngine: e.id, LabelSubmission: sp.name},
		},
		HostConfig: &dc.HostConfig{
			// No network: a loopback interface only. Docker writes no
			// resolv.conf then, so a lookup asks 127.0.0.1:53 and [::1]:53,
			// the container's own loopback; DNS keeps a resolver, should
			// one be written, on that loopback too.
			NetworkMode: "none",
			DNS:         []string{"127.0.0.1"},
			IpcMode:     "none",
			Mounts:      sp.mounts,
			Tmpfs:       tmpfs,
			// A build's root is read-only. A run's is not, only so that the
			// lab, its PID 1 and root, can take the group bits off "/"
			// (cmd/lab's openRoot: without that every path lookup the judged
			// make costs a round trip to a FUSE driver's daemon). Nothing in
			// the image is writable by the judged either way: every file and
			// directory is root's, none is writable by others, and the
			// writable places are the tmpfs mounts.
			ReadonlyRootfs: sp.user != JudgeUser,
			CapDrop:        []string{"ALL"},
			CapAdd:         sp.caps,
			SecurityOpt:    []string{"no-new-privileges:true"},
			Memory:         l.Memory,
			MemorySwap:     l.Memory, // the same: no swap
			PidsLimit:      l.PIDs,
			CPUPeriod:      period,
			CPUQuota:       int64(l.CPUs * period),
			// No core dumps; open files bounded per process (kernel memory
			// that cgroup v1 may not charge to the container).
			Ulimits: []dc.ULimit{{Name: "core", Soft: 0, Hard: 0}, {Name: "nofile", Soft: maxFiles, Hard: maxFiles}},
			LogConfig: dc.LogConfig{Type: "json-file",
				Config: map[string]string{"max-size": logMaxSize, "max-file": "2"}},
			AutoRemove: false, // the exit code and logs are read first
		},
	})
	if err != nil {
		// The container may exist although create reported an error: it
		// is removed by name (the API takes a name where it takes an id).
		return e.remember(name), fmt.Errorf("isolate: creating container %s: %w", name, err)
	}
	e.remember(c.ID)
	if err := ctx.Err(); err != nil {
		return c.ID, fmt.Errorf("isolate: creating container %s: %w", name, err)
	}
	return c.ID, nil
}

// remember records a container the engine made, so that its tests judge
// only their own containers' processes.
func (e *Engine) remember(id string) string {
	e.mu.Lock()
	e.made = append(e.made, id)
	e.mu.Unlock()
	return id
}

// containerResult is what a container did.
type containerResult struct {
	code           int
	wall, oom      bool
	took           time.Duration
	stdout, stderr string
	stdoutCut      bool
	stderrCut      bool
}

// runContainer starts the container, waits for its end or the wall-clock
// limit (then kills it), and reads its exit and output.
func (e *Engine) runContainer(ctx context.Context, id string, wall time.Duration) (containerResult, error) {
	var res containerResult
	// Not cancelled with ctx, as create: a start the daemon goes on with
	// after the client gave up would race the removal.
	sctx, scancel := context.WithTimeout(context.WithoutCancel(ctx), apiTimeout)
	err := e.client.StartContainerWithContext(id, nil, sctx)
	scancel()
	if err != nil {
		return res, fmt.Errorf("isolate: starting container: %w", err)
	}
	if ctx.Err() != nil {
		return res, fmt.Errorf("isolate: interrupted: %w", ctx.Err())
	}
	t0 := time.Now()
	wctx, cancel := context.WithTimeout(ctx, wall)
	_, werr := e.client.WaitContainerWithContext(id, wctx)
	cancel()
	if werr != nil {
		if ctx.Err() != nil {
			return res, fmt.Errorf("isolate: interrupted: %w", ctx.Err())
		}
		if !errors.Is(wctx.Err(), context.DeadlineExceeded) {
			return res, fmt.Errorf("isolate: waiting for the container: %w", werr)
		}
		// Past the wall-clock limit: kill it from outside.
		res.wall = true
		kctx, kcancel := context.WithTimeout(context.Background(), apiTimeout)
		kerr := e.client.KillContainer(dc.KillContainerOptions{ID: id, Signal: dc.SIGKILL, Context: kctx})
		var notRunning *dc.ContainerNotRunning
		if kerr != nil && !errors.As(kerr, &notRunning) {
			kcancel()
			return res, fmt.Errorf("isolate: killing the container at the wall-clock limit: %w", kerr)
		}
		_, werr = e.client.WaitContainerWithContext(id, kctx)
		kcancel()
		if werr != nil {
			return res, fmt.Errorf("isolate: waiting for the killed container: %w", werr)
		}
	}
	res.took = time.Since(t0)
	ictx, icancel := context.WithTimeout(context.Background(), apiTimeout)
	defer icancel()
	c, err := e.client.InspectContainerWithContext(id, ictx)
	if err != nil {
		return res, fmt.Errorf("isolate: inspecting the container: %w", err)
	}
	if c.State.Running {
		return res, errors.New("isolate: the container still runs after its wait returned")
	}
	res.code, res.oom = c.State.ExitCode, c.State.OOMKilled
	if res.wall {
		res.code = -1
	}
	stdout, stderr := &capped{max: maxStdout}, &capped{max: maxStderr}
	err = e.client.Logs(dc.LogsOptions{Context: ictx, Container: id, OutputStream: stdout, ErrorStream: stderr,
		Stdout: true, Stderr: true})
	if err != nil {
		return res, fmt.Errorf("isolate: reading the container's output: %w", err)
	}
	res.stdout, res.stderr = stdout.b.String(), stderr.b.String()
	res.stdoutCut, res.stderrCut = stdout.cut, stderr.cut
	return res, nil
}

// capped keeps the first max bytes written to it.
type capped struct {
	b   bytes.Buffer
	max int
	cut bool
}

func (c *capped) Write(p []byte) (int, error) {
	room := c.max - c.b.Len()
	if len(p) > room {
		c.cut = true
		c.b.Write(p[:max(room, 0)])
	} else {
		c.b.Write(p)
	}
	return len(p), nil
}

// containerSafe makes s usable in a container name.
func containerSafe(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '_', r == '-':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
		if b.Len() >= 40 {
			break
		}
	}
	if b.Len() == 0 {
		return "sub"
	}
	return b.String()
}
