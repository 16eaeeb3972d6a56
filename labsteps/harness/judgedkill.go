package harness

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// JudgedKillCommand is the lab's hidden subcommand that becomes a judged
// identity and ends every process of it: lab judged-kill UID GID.
const JudgedKillCommand = "judged-kill"

// stepIDs is how many ids the steps take above a judged base: step n's
// programs run as base+n (ForStep), for n from 1 to stepIDs.
const stepIDs = 16

// ForStep is the identity step n's programs run as: the base uid and gid
// plus n. Steps run side by side in one grading container, and the end of
// a step kills every process of its identity (KillAll); with one identity
// for all, that kill would end another step's programs, and a program one
// step left running (setsid puts it outside every process group the lab
// kills) could write the next step's files. nil stays nil.
func (j *Judged) ForStep(n int) *Judged {
	if j == nil {
		return nil
	}
	if n < 1 || n > stepIDs {
		panic(fmt.Sprintf("harness: ForStep(%d): want 1 to %d", n, stepIDs))
	}
	s := *j
	s.UID += uint32(n)
	s.GID += uint32(n)
	return &s
}

// KillAll ends every process running as j, in or out of the process
// groups the lab started: a program that called setsid outlives the kill
// of its group, and would go on writing files the lab is about to judge.
// It runs the judged-kill helper, which becomes j and kills everything it
// may signal: exactly j's processes, none of the judge's or another
// identity's. Nothing to do without a judged identity.
func (j *Judged) KillAll() error {
	if j == nil {
		return nil
	}
	if len(j.Exec) == 0 {
		return fmt.Errorf("no lab to run %s as uid %d", JudgedKillCommand, j.UID)
	}
	ctx, cancel := context.WithTimeout(context.Background(), JudgedKillLimit)
	defer cancel()
	cmd := exec.CommandContext(ctx, j.Exec[0], JudgedKillCommand, strconv.FormatUint(uint64(j.UID), 10), strconv.FormatUint(uint64(j.GID), 10))
	cmd.Env = (*Judged)(nil).Env()
	// The helper runs as the judged: a judged program may stop it
	// (SIGSTOP) or hold its output open. Its own deadline, a bounded
	// output and a bounded wait for the pipe keep the judge going.
	out := newCapBuffer(64 << 10)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.WaitDelay = time.Second
	err := cmd.Run()
	if ctx.Err() != nil {
		return fmt.Errorf("%s %d: still running after %v (stopped or held by a program of that uid): %w", JudgedKillCommand, j.UID, JudgedKillLimit, ErrJudgedStall)
	}
	if err != nil {
		return fmt.Errorf("%s %d: %w: %s", JudgedKillCommand, j.UID, err, strings.TrimSpace(out.String()))
	}
	return nil
}

// JudgedKillLimit bounds one run of the judged-kill helper: it takes
// milliseconds unless something stops it.
var JudgedKillLimit = 30 * time.Second

// ErrJudgedStall wraps a helper of the lab's that a judged program stopped
// or held past its own time limit: the submission's failure, not the
// grader's trouble.
var ErrJudgedStall = errors.New("a lab helper running as the judged was stalled")

// killRounds bounds JudgedKill: a process that forks between two rounds is
// caught by the next; one that outpaces this many is reported.
const killRounds = 1000

// JudgedKill is the judged-kill subcommand: args are UID GID. It drops to
// the identity, then sends SIGKILL to every process it may signal (kill(-1):
// every process whose real or saved uid is this one, not itself) until no
// live process of the uid is left. Zombies are left to their reaper: they
// run nothing.
func JudgedKill(args []string) error {
	if len(args) != 2 {
		return fmt.Errorf("usage: lab %s UID GID", JudgedKillCommand)
	}
	if err := become(JudgedKillCommand, args[0], args[1]); err != nil {
		return err
	}
	uid := os.Getuid()
	for range killRounds {
		if err := syscall.Kill(-1, syscall.SIGKILL); errors.Is(err, syscall.ESRCH) {
			return nil
		} else if err != nil {
			return fmt.Errorf("kill(-1): %w", err)
		}
		if live := liveProcesses(uid); live == 0 {
			return nil
		}
	}
	return fmt.Errorf("processes of uid %d still running after %d rounds of SIGKILL", uid, killRounds)
}

// liveProcesses counts the processes other than this one whose real uid
// is uid and that are not zombies (nor already dead), as /proc shows them.
func liveProcesses(uid int) int {
	self := os.Getpid()
	pids, _ := filepath.Glob("/proc/[0-9]*/status")
	n := 0
	for _, p := range pids {
		pid, err := strconv.Atoi(filepath.Base(filepath.Dir(p)))
		if err != nil || pid == self {
			continue
		}
		b, err := os.ReadFile(p)
		if err != nil {
			continue // gone
		}
		var state string
		realUID := -1
		for _, line := range strings.Split(string(b), "\n") {
			switch {
			case strings.HasPrefix(line, "State:"):
				state = strings.TrimSpace(strings.TrimPrefix(line, "State:"))
			case strings.HasPrefix(line, "Uid:"):
				if f := strings.Fields(strings.TrimPrefix(line, "Uid:")); len(f) > 0 {
					realUID, _ = strconv.Atoi(f[0])
				}
			}
		}
		if realUID == uid && !strings.HasPrefix(state, "Z") && !strings.HasPrefix(state, "X") {
			n++
		}
	}
	return n
}
