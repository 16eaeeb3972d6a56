package systrace

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"syscall"
)

// System call numbers of linux/amd64 for the Watched calls.
var sysNames = map[uint64]string{
	1: "write", 18: "pwrite64", 20: "writev", 296: "pwritev", 328: "pwritev2",
	74: "fsync", 75: "fdatasync", 277: "sync_file_range",
	44: "sendto", 46: "sendmsg",
	87: "unlink", 263: "unlinkat", 82: "rename", 264: "renameat", 316: "renameat2",
	77: "ftruncate", 76: "truncate",
}

const (
	ptraceOExitKill = 0x100000
	enosys          = ^uint64(37) // -ENOSYS in rax marks a syscall-enter stop
	atFDCWD         = -100
)

func killAt(argv []string, opts KillOptions) (*Process, error) {
	if len(argv) == 0 {
		return nil, fmt.Errorf("killat: no program")
	}
	stdin, c1, err := devNull(opts.Stdin)
	if err != nil {
		return nil, err
	}
	stdout, c2, err := devNull(opts.Stdout)
	if err != nil {
		c1()
		return nil, err
	}
	stderr, c3, err := devNull(opts.Stderr)
	if err != nil {
		c1()
		c2()
		return nil, err
	}
	p := &Process{done: make(chan struct{})}
	started := make(chan error, 1)
	// Every ptrace request must come from the thread that attached: one
	// locked goroutine starts the process and runs the whole loop.
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		defer close(p.done)
		defer c1()
		defer c2()
		defer c3()
		env := opts.Env
		if env == nil {
			env = os.Environ()
		}
		proc, err := os.StartProcess(argv[0], argv, &os.ProcAttr{Dir: opts.Dir, Env: env,
			Files: []*os.File{stdin, stdout, stderr},
			Sys:   &syscall.SysProcAttr{Ptrace: true, Setpgid: true}})
		if err != nil {
			p.err = err
			started <- err
			return
		}
		p.Pid = proc.Pid
		started <- nil
		p.res, p.err = loop(proc.Pid, opts)
		proc.Release()
	}()
	if err := <-started; err != nil {
		return nil, fmt.Errorf("killat: start %s: %w", argv[0], err)
	}
	return p, nil
}

func loop(pid int, opts KillOptions) (Killed, error) {
	res := Killed{Code: -1}
	var ws syscall.WaitStatus
	// The first stop is the SIGTRAP after exec.
	if _, err := wait4(pid, &ws); err != nil {
		return res, fmt.Errorf("killat: wait for exec: %w", err)
	}
	if !ws.Stopped() {
		return exitOf(res, ws), nil
	}
	if err := syscall.PtraceSetOptions(pid, syscall.PTRACE_O_TRACESYSGOOD|syscall.PTRACE_O_TRACECLONE|
		syscall.PTRACE_O_TRACEFORK|syscall.PTRACE_O_TRACEVFORK|syscall.PTRACE_O_TRACEEXEC|ptraceOExitKill); err != nil {
		syscall.Kill(pid, syscall.SIGKILL)
		return res, fmt.Errorf("killat: ptrace options: %w", err)
	}
	syscall.PtraceSyscall(pid, 0)
	seen := map[int]bool{pid: true}
	matched, killed := 0, false
	for {
		// Only this process group: the tracees, not other children of
		// the caller (a receiver it started, another KillAt).
		tid, err := wait4(-pid, &ws)
		if err == syscall.ECHILD {
			return res, nil
		}
		if err != nil {
			return res, fmt.Errorf("killat: wait: %w", err)
		}
		if ws.Exited() || ws.Signaled() {
			if tid == pid {
				res = exitOf(res, ws)
			}
			continue
		}
		if !ws.Stopped() {
			continue
		}
		sig := ws.StopSignal()
		switch {
		case sig == syscall.SIGTRAP|0x80: // a system call stop
			if killed {
				continue // dying: leave it stopped, SIGKILL ends it
			}
			var regs syscall.PtraceRegs
			if err := syscall.PtraceGetRegs(tid, &regs); err == nil && regs.Rax == enosys {
				if name, ok := sysNames[regs.Orig_rax]; ok {
					s := site(tid, name, &regs)
					if opts.Match != nil && opts.Match(s) {
						matched++
						s.Index = matched
					}
					res.Sites = append(res.Sites, s)
					if s.Index > 0 && s.Index == opts.N {
						hit := s
						res.Hit = &hit
						killed = true
						syscall.Kill(-pid, syscall.SIGKILL)
						syscall.Kill(pid, syscall.SIGKILL)
						continue
					}
				}
			}
			syscall.PtraceSyscall(tid, 0)
		case sig == syscall.SIGTRAP && ws.TrapCause() > 0: // clone, fork, exec events
			syscall.PtraceSyscall(tid, 0)
		case sig == syscall.SIGSTOP && !seen[tid]: // a new thread's or child's first stop
			seen[tid] = true
			syscall.PtraceSyscall(tid, 0)
		default: // a signal for the program: deliver it
			seen[tid] = true
			if killed {
				continue
			}
			syscall.PtraceSyscall(tid, int(sig))
		}
	}
}

func wait4(pid int, ws *syscall.WaitStatus) (int, error) {
	for {
		tid, err := syscall.Wait4(pid, ws, syscall.WALL, nil)
		if err != syscall.EINTR {
			return tid, err
		}
	}
}

func exitOf(res Killed, ws syscall.WaitStatus) Killed {
	switch {
	case ws.Exited():
		res.Code, res.Signal = ws.ExitStatus(), ""
	case ws.Signaled():
		res.Code, res.Signal = -1, SignalName(ws.Signal())
	}
	return res
}

// site decodes the call's file: the descriptor's target, or the path
// argument (relative paths resolved against the thread's directory).
func site(tid int, name string, r *syscall.PtraceRegs) Site {
	s := Site{TID: tid, Name: name, FD: -1}
	peek := func(addr uintptr, out []byte) (int, error) { return syscall.PtracePeekData(tid, addr, out) }
	path := func(dirfd int64, addr uint64) string {
		p := readString(peek, uintptr(addr))
		if p == "" || filepath.IsAbs(p) {
			return p
		}
		base := "/proc/" + strconv.Itoa(tid) + "/cwd"
		if dirfd != atFDCWD {
			base = "/proc/" + strconv.Itoa(tid) + "/fd/" + strconv.FormatInt(dirfd, 10)
		}
		if d, err := os.Readlink(base); err == nil {
			return filepath.Join(d, p)
		}
		return p
	}
	switch name {
	case "unlink", "rename", "truncate":
		s.Path = path(atFDCWD, r.Rdi)
	case "unlinkat", "renameat", "renameat2":
		s.Path = path(int64(int32(r.Rdi)), r.Rsi)
	default:
		s.FD = int(int32(r.Rdi))
		if t, err := os.Readlink("/proc/" + strconv.Itoa(tid) + "/fd/" + strconv.Itoa(s.FD)); err == nil {
			s.Path = t
		}
	}
	return s
}
