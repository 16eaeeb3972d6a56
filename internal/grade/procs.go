package grade

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// The processes of a step in the unisolated mode: found in /proc by
// process group or by the tag in their environment, and killed.

type procInfo struct {
	pid, ppid, pgrp int
	state           byte
	comm            string
}

// scanProcs lists every process in /proc: pid, parent, process group,
// state and name.
func scanProcs() []procInfo {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []procInfo
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp …; comm may hold spaces and parens.
		open, close := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')')
		if open < 0 || close < open {
			continue
		}
		f := strings.Fields(string(b[close+1:]))
		if len(f) < 3 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		pgrp, _ := strconv.Atoi(f[2])
		out = append(out, procInfo{pid: pid, ppid: ppid, pgrp: pgrp, state: f[0][0], comm: string(b[open+1 : close])})
	}
	return out
}

// killGroup SIGKILLs the other live processes of this process's group —
// only orphans (their parent is outside the group: it ended, and they were
// re-parented) when orphansOnly. It returns "name (pid N)" for each.
func killGroup(orphansOnly bool) []string {
	me := os.Getpid()
	pg, err := syscall.Getpgid(0)
	if err != nil || pg != me {
		return nil // not a group leader: never sweep a group the worker does not own
	}
	procs := scanProcs()
	inGroup := map[int]bool{}
	for _, p := range procs {
		if p.pgrp == pg {
			inGroup[p.pid] = true
		}
	}
	var killed []string
	for _, p := range procs {
		if p.pgrp != pg || p.pid == me || p.state == 'Z' {
			continue
		}
		if orphansOnly && inGroup[p.ppid] {
			continue
		}
		if syscall.Kill(p.pid, syscall.SIGKILL) == nil {
			killed = append(killed, fmt.Sprintf("%s (pid %d)", p.comm, p.pid))
		}
	}
	return killed
}

// tagEnv marks every process of one step: the grader sets it in the
// worker's environment, and the programs the step starts inherit it, also
// when they leave the worker's process group (setsid, a daemonizing fork).
const tagEnv = "SNACKLAB_GRADE_STEP"

// killTagged SIGKILLs every other process whose environment holds
// tagEnv=tag, and returns "name (pid N)" for each.
func killTagged(tag string) []string {
	if tag == "" {
		return nil
	}
	me := os.Getpid()
	want := []byte("\x00" + tagEnv + "=" + tag + "\x00")
	var killed []string
	for _, p := range scanProcs() {
		if p.pid == me || p.state == 'Z' {
			continue
		}
		env, err := os.ReadFile("/proc/" + strconv.Itoa(p.pid) + "/environ")
		if err != nil || !bytes.Contains(append(append([]byte{0}, env...), 0), want) {
			continue
		}
		if syscall.Kill(p.pid, syscall.SIGKILL) == nil {
			killed = append(killed, fmt.Sprintf("%s (pid %d)", p.comm, p.pid))
		}
	}
	return killed
}

// residentBytes is this process's resident set size.
func residentBytes() int64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0
	}
	pages, _ := strconv.ParseInt(f[1], 10, 64)
	return pages * int64(os.Getpagesize())
}
