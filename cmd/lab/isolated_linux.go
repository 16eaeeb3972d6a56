//go:build linux

package main

import (
	"fmt"
	"os"
	"syscall"
)

// isolatedEnv, set to 1, says the lab runs as PID 1 of a grading container
// (internal/isolate, docs/isolation.md). The programs it grades run there
// under the lab's own user id, and a process may open another's
// /proc/PID/fd/N, mem and environ when they share a uid and the target is
// dumpable: a submission could write a forged results.json into the lab's
// stderr, which carries the results out of the container. A non-dumpable
// process's /proc entries belong to root, so that is refused; the lab still
// reads its children's /proc (step 7): they are dumpable again after exec.
const isolatedEnv = "SNACKLAB_ISOLATED"

// isolatedMarker is the first line the lab writes on stderr once it is
// non-dumpable; internal/isolate checks for it before trusting a lab binary.
const isolatedMarker = "snacklab-lab: isolated: non-dumpable"

func init() {
	if os.Getenv(isolatedEnv) != "1" {
		return
	}
	if _, _, e := syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_SET_DUMPABLE, 0, 0); e != 0 {
		fmt.Fprintf(os.Stderr, "lab: %s=1 but prctl(PR_SET_DUMPABLE, 0) failed: %v\n", isolatedEnv, e)
		os.Exit(1)
	}
	fmt.Fprintln(os.Stderr, isolatedMarker)
}

// rootMode is the grading container's root directory once the lab has
// prepared it for the judged: rwx for root, r-x for anyone else, and no
// group bits. With group bits, the kernel asks the file system for the
// directory's POSIX ACL at every path lookup a non-owner makes through it
// (acl_permission_check); under Docker's fuse-overlayfs driver that is a
// round trip to the FUSE daemon each time, uncached: 20–45 µs a lookup
// against 1.3 µs, and about a third more CPU for every program the judged
// run (docs/grading.md, *Where it goes*). Root's own lookups never ask.
const rootMode = 0o705

// openRoot gives the grading container's root directory rootMode. Only the
// lab that is PID 1 of a grading container does it (never a lab run on a
// host with the variable set, as internal/isolate's check of the binary
// does); where the root is read-only (a pod, an engine that mounts it so)
// it stays as it is: that costs time, not safety.
func openRoot() {
	if os.Getenv(isolatedEnv) != "1" || os.Getpid() != 1 {
		return
	}
	_ = os.Chmod("/", rootMode)
}
