package powercut

import (
	"fmt"
	"os"
	"runtime"
	"syscall"
	"unsafe"
)

const (
	ptraceGetSyscallInfo = 0x420e
	syscallInfoEntry     = 1
	syscallInfoExit      = 2
	ptraceOExitKill      = 0x100000
)

// syscallInfo is struct ptrace_syscall_info (linux/ptrace.h): op, then
// the entry's number and arguments, or the exit's return value.
type syscallInfo struct {
	Op    uint8
	_     [3]uint8
	Arch  uint32
	IP    uint64
	SP    uint64
	Nr    uint64 // entry: the call; exit: the return value (rval)
	Args  [6]uint64
	Extra uint32
}

func getSyscallInfo(tid int) (syscallInfo, error) {
	var si syscallInfo
	_, _, errno := syscall.Syscall6(syscall.SYS_PTRACE, ptraceGetSyscallInfo, uintptr(tid),
		unsafe.Sizeof(si), uintptr(unsafe.Pointer(&si)), 0, 0)
	if errno != 0 {
		return si, errno
	}
	return si, nil
}

func start(argv []string, opts Options, initial map[string][]byte) (*Process, error) {
	stdin, err := os.Open(os.DevNull)
	if err != nil {
		return nil, err
	}
	stdout, stderr := opts.Stdout, opts.Stderr
	if stdout == nil {
		stdout = stdin
	}
	if stderr == nil {
		stderr = stdin
	}
	r, err := newRecorder(opts.Root, initial)
	if err != nil {
		stdin.Close()
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
		defer stdin.Close()
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
		code, sig, err := r.loop(proc.Pid)
		proc.Release()
		rec := &Recording{Root: opts.Root, Initial: initial, InitialInode: r.initialInode, Ops: r.finish(), Code: code, Signal: sig}
		if err == nil {
			rec.Final, err = Snapshot(opts.Root)
		}
		p.rec, p.err = rec, err
	}()
	if err := <-started; err != nil {
		return nil, fmt.Errorf("powercut: start %s: %w", argv[0], err)
	}
	return p, nil
}

// loop follows every thread and child of pid from system call to system
// call until all have ended, feeding each entry and exit to the recorder.
func (r *recorder) loop(pid int) (code int, sig string, err error) {
	code = -1
	var ws syscall.WaitStatus
	if _, err := wait4(pid, &ws); err != nil { // the SIGTRAP after exec
		return code, sig, fmt.Errorf("powercut: wait for exec: %w", err)
	}
	if !ws.Stopped() {
		code, sig = exitOf(ws)
		return code, sig, nil
	}
	if err := syscall.PtraceSetOptions(pid, syscall.PTRACE_O_TRACESYSGOOD|syscall.PTRACE_O_TRACECLONE|
		syscall.PTRACE_O_TRACEFORK|syscall.PTRACE_O_TRACEVFORK|syscall.PTRACE_O_TRACEEXEC|ptraceOExitKill); err != nil {
		syscall.Kill(pid, syscall.SIGKILL)
		return code, sig, fmt.Errorf("powercut: ptrace options: %w", err)
	}
	syscall.PtraceSyscall(pid, 0)
	seen := map[int]bool{pid: true}
	for {
		// Only this process group: not other children of the caller.
		tid, err := wait4(-pid, &ws)
		if err == syscall.ECHILD {
			return code, sig, nil
		}
		if err != nil {
			return code, sig, fmt.Errorf("powercut: wait: %w", err)
		}
		if ws.Exited() || ws.Signaled() {
			if tid == pid {
				code, sig = exitOf(ws)
			}
			delete(r.pending, tid)
			continue
		}
		if !ws.Stopped() {
			continue
		}
		stop := ws.StopSignal()
		switch {
		case stop == syscall.SIGTRAP|0x80: // a system call stop
			if si, err := getSyscallInfo(tid); err == nil {
				switch si.Op {
				case syscallInfoEntry:
					r.enter(tid, si.Nr, si.Args)
				case syscallInfoExit:
					r.exit(tid, int64(si.Nr))
				}
			}
			syscall.PtraceSyscall(tid, 0)
		case stop == syscall.SIGTRAP && ws.TrapCause() > 0: // clone, fork, exec events
			syscall.PtraceSyscall(tid, 0)
		case stop == syscall.SIGSTOP && !seen[tid]: // a new thread's or child's first stop
			seen[tid] = true
			syscall.PtraceSyscall(tid, 0)
		default: // a signal for the program: deliver it
			seen[tid] = true
			syscall.PtraceSyscall(tid, int(stop))
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

func exitOf(ws syscall.WaitStatus) (int, string) {
	if ws.Signaled() {
		if ws.Signal() == syscall.SIGKILL {
			return -1, "SIGKILL"
		}
		return -1, ws.Signal().String()
	}
	return ws.ExitStatus(), ""
}

// peek reads n bytes of thread tid's memory at addr.
func peek(tid int, addr uint64, n int) []byte {
	if n <= 0 {
		return nil
	}
	f, err := os.Open(fmt.Sprintf("/proc/%d/mem", tid))
	if err != nil {
		return nil
	}
	defer f.Close()
	b := make([]byte, n)
	got, _ := f.ReadAt(b, int64(addr))
	return b[:got]
}

// peekIovec reads at most n bytes from an iovec array of cnt entries.
func peekIovec(tid int, iov uint64, cnt, n int) []byte {
	var out []byte
	for i := 0; i < cnt && len(out) < n; i++ {
		ent := peek(tid, iov+uint64(16*i), 16)
		if len(ent) < 16 {
			break
		}
		base := *(*uint64)(unsafe.Pointer(&ent[0]))
		l := int(*(*uint64)(unsafe.Pointer(&ent[8])))
		out = append(out, peek(tid, base, min(l, n-len(out)))...)
	}
	return out
}
