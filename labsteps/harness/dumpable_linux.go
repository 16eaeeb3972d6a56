package harness

import "syscall"

// notDumpable makes this process non-dumpable: its /proc entries become
// root's, so a process of the same uid can neither ptrace it nor read its
// memory or its open files. The kernel already does this when a process
// changes its uid, unless /proc/sys/fs/suid_dumpable says otherwise; the
// judged helper asks for it whatever the grader's setting.
func notDumpable() error {
	if _, _, e := syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_SET_DUMPABLE, 0, 0); e != 0 {
		return e
	}
	return nil
}
