package grade

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// In the unisolated mode (lab grade --trusted) every step's worker joins a
// cgroup of its own before it starts anything. Whatever its processes do —
// clear their environment, setsid, double-fork — they stay in that cgroup,
// so the grader kills exactly them: every pid listed in cgroup.procs, until
// none is left. The memory controller bounds the step's processes together
// (Config.StepMemory) and the pids controller stops a fork bomb. Where no
// cgroup can be made (not root, a read-only cgroupfs), the worker falls back
// to its process group and the SNACKLAB_GRADE_STEP tag in the environment,
// which a process that clears its environment escapes (docs/grading.md).

// cgroupSeq tells apart the cgroups of concurrent Grade calls in one process.
var cgroupSeq atomic.Int64

// cgroups makes per-step cgroups under this process's own cgroups.
type cgroups struct {
	parents []string // one per controller (v1) or the one unified (v2)
	v2      bool
}

// stepCgroup is one step's cgroup: a directory per controller.
type stepCgroup struct{ dirs []string }

// newCgroups finds where this process may make child cgroups, or returns nil.
func newCgroups() *cgroups {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return nil
	}
	own := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.SplitN(l, ":", 3)
		if len(f) == 3 {
			own[f[1]] = f[2]
		}
	}
	name := fmt.Sprintf("snacklab-grade-%d-%d", os.Getpid(), cgroupSeq.Add(1))
	cg := &cgroups{}
	if p, ok := own["pids"]; ok {
		for _, c := range []string{"pids", "memory"} {
			if q, ok := own[c]; ok || c == "pids" {
				if !ok {
					q = p
				}
				cg.parents = append(cg.parents, filepath.Join("/sys/fs/cgroup", c, q, name))
			}
		}
	} else if p, ok := own[""]; ok {
		cg.v2 = true
		cg.parents = []string{filepath.Join("/sys/fs/cgroup", p, name)}
	}
	if len(cg.parents) == 0 {
		return nil
	}
	for _, d := range cg.parents {
		if err := os.Mkdir(d, 0o755); err != nil {
			cg.close()
			return nil
		}
	}
	if cg.v2 {
		// A v2 cgroup with processes cannot have children with controllers;
		// the grader's own processes stay in the parent, steps go in leaves.
		os.WriteFile(filepath.Join(cg.parents[0], "cgroup.subtree_control"), []byte("+pids +memory"), 0)
	}
	return cg
}

// step makes the cgroup of one step with the memory and process limits.
func (c *cgroups) step(tag string, mem int64, pids int) (*stepCgroup, error) {
	if c == nil {
		return nil, nil
	}
	s := &stepCgroup{}
	for _, p := range c.parents {
		d := filepath.Join(p, safeName(tag))
		if err := os.Mkdir(d, 0o755); err != nil {
			s.remove()
			return nil, err
		}
		s.dirs = append(s.dirs, d)
		set := func(file, v string) {
			os.WriteFile(filepath.Join(d, file), []byte(v), 0)
		}
		switch {
		case c.v2:
			set("memory.max", strconv.FormatInt(mem, 10))
			set("memory.swap.max", "0")
			set("pids.max", strconv.Itoa(pids))
		case strings.Contains(d, "/memory/"):
			set("memory.limit_in_bytes", strconv.FormatInt(mem, 10))
			set("memory.memsw.limit_in_bytes", strconv.FormatInt(mem, 10))
		case strings.Contains(d, "/pids/"):
			set("pids.max", strconv.Itoa(pids))
		}
	}
	return s, nil
}

// procsFiles are the files a process writes its pid to, to join.
func (s *stepCgroup) procsFiles() []string {
	var out []string
	for _, d := range s.dirs {
		out = append(out, filepath.Join(d, "cgroup.procs"))
	}
	return out
}

// killAll SIGKILLs every process in the step's cgroup but skip, until none
// is left (a process may fork while the list is read: the loop catches its
// child), and returns "name (pid N)" for each.
func (s *stepCgroup) killAll(skip int) []string {
	if s == nil || len(s.dirs) == 0 {
		return nil
	}
	return killListed(s.procsFiles()[0], skip)
}

func killListed(procs string, skip int) []string {
	var killed []string
	seen := map[int]bool{}
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		b, err := os.ReadFile(procs)
		if err != nil {
			return killed
		}
		left := 0
		for _, f := range strings.Fields(string(b)) {
			pid, _ := strconv.Atoi(f)
			if pid <= 0 || pid == skip {
				continue
			}
			left++
			if !seen[pid] && syscall.Kill(pid, syscall.SIGKILL) == nil {
				seen[pid] = true
				killed = append(killed, fmt.Sprintf("%s (pid %d)", comm(pid), pid))
			} else {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		if left == 0 {
			return killed
		}
		time.Sleep(10 * time.Millisecond) // the kernel reaps; the list shrinks
	}
	return killed
}

func comm(pid int) string {
	b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
	return string(bytes.TrimSpace(b))
}

// oomKills is how many of the step's processes the kernel killed for
// reaching the memory limit: memory.events (v2) or memory.oom_control (v1)
// say "oom_kill N". 0 when neither can be read.
func (s *stepCgroup) oomKills() int {
	if s == nil {
		return 0
	}
	for _, d := range s.dirs {
		for _, f := range []string{"memory.events", "memory.oom_control"} {
			b, err := os.ReadFile(filepath.Join(d, f))
			if err != nil {
				continue
			}
			for _, l := range strings.Split(string(b), "\n") {
				if v, ok := strings.CutPrefix(l, "oom_kill "); ok {
					n, _ := strconv.Atoi(strings.TrimSpace(v))
					return n
				}
			}
		}
	}
	return 0
}

// remove kills what is left and removes the step's cgroup.
func (s *stepCgroup) remove() {
	if s == nil {
		return
	}
	s.killAll(0)
	for _, d := range s.dirs {
		for range 50 {
			if err := os.Remove(d); err == nil || errors.Is(err, os.ErrNotExist) {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// close removes the grader's parent cgroups (empty by then).
func (c *cgroups) close() {
	if c == nil {
		return
	}
	for _, d := range c.parents {
		os.Remove(d)
	}
}

// joinCgroups puts the calling process into the cgroups whose cgroup.procs
// files are listed.
func joinCgroups(files []string) error {
	for _, f := range files {
		if err := os.WriteFile(f, []byte("0"), 0); err != nil {
			return fmt.Errorf("joining cgroup %s: %w", filepath.Dir(f), err)
		}
	}
	return nil
}
