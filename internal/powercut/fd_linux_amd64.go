package powercut

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// fdInode is the model inode behind a descriptor, when it is a regular
// file of the root the recorder knows.
func (r *recorder) fdInode(tid, fd int) (int, bool) {
	id, err := statID(fmt.Sprintf("/proc/%d/fd/%d", tid, fd), true)
	if err != nil {
		return 0, false
	}
	inode, ok := r.inodes[id]
	return inode, ok
}

func (r *recorder) isRootDir(tid, fd int) bool {
	link, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%d", tid, fd))
	if err != nil || filepath.Clean(link) != r.root {
		return false
	}
	fi, err := os.Stat(fmt.Sprintf("/proc/%d/fd/%d", tid, fd))
	return err == nil && fi.IsDir()
}

// outTarget says whether fd is where answers go: "stdout" (descriptor 1)
// or "socket".
func outTarget(tid, fd int) string {
	if fd == 1 {
		return "stdout"
	}
	link, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%d", tid, fd))
	if err == nil && strings.HasPrefix(link, "socket:") {
		return "socket"
	}
	return ""
}

// position is a descriptor's file offset, where write and writev write:
// its size for a file opened O_APPEND.
func position(tid, fd int) int64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/fdinfo/%d", tid, fd))
	if err != nil {
		return 0
	}
	defer f.Close()
	var pos int64
	var flags uint64
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, _ := strings.Cut(sc.Text(), ":")
		v = strings.TrimSpace(v)
		switch k {
		case "pos":
			pos, _ = strconv.ParseInt(v, 10, 64)
		case "flags":
			flags, _ = strconv.ParseUint(v, 8, 64)
		}
	}
	if flags&syscall.O_APPEND != 0 {
		if fi, err := os.Stat(fmt.Sprintf("/proc/%d/fd/%d", tid, fd)); err == nil {
			return fi.Size()
		}
	}
	return pos
}

// resolve reads a path argument and makes it absolute against dirfd (or
// the thread's working directory).
func resolve(tid int, dirfd int64, addr uint64) string {
	p := readString(tid, addr)
	if p == "" || filepath.IsAbs(p) {
		return filepath.Clean(p)
	}
	base := fmt.Sprintf("/proc/%d/cwd", tid)
	if dirfd != atFDCWD {
		base = fmt.Sprintf("/proc/%d/fd/%d", tid, dirfd)
	}
	d, err := os.Readlink(base)
	if err != nil {
		return p
	}
	return filepath.Join(d, p)
}

func readString(tid int, addr uint64) string {
	var b []byte
	for len(b) < 4096 {
		chunk := peek(tid, addr+uint64(len(b)), 256)
		if len(chunk) == 0 {
			break
		}
		if i := strings.IndexByte(string(chunk), 0); i >= 0 {
			return string(append(b, chunk[:i]...))
		}
		b = append(b, chunk...)
	}
	return string(b)
}

// inRoot gives the name of an absolute path directly in the root.
func (r *recorder) inRoot(p string) (string, bool) {
	if filepath.Dir(p) != r.root || p == r.root {
		return "", false
	}
	return filepath.Base(p), true
}

var callNames = map[uint64]string{sysWrite: "write", sysOpen: "open", sysMmap: "mmap", sysPwrite64: "pwrite64",
	sysWritev: "writev", sysSendfile: "sendfile", sysSendto: "sendto", sysSendmsg: "sendmsg", sysFsync: "fsync",
	sysFdatasync: "fdatasync", sysTruncate: "truncate", sysFtruncate: "ftruncate", sysRename: "rename",
	sysMkdir: "mkdir", sysRmdir: "rmdir", sysCreat: "creat", sysLink: "link", sysUnlink: "unlink",
	sysSymlink: "symlink", sysSync: "sync", sysOpenat: "openat", sysMkdirat: "mkdirat", sysUnlinkat: "unlinkat",
	sysRenameat: "renameat", sysLinkat: "linkat", sysSymlinkat: "symlinkat", sysSplice: "splice",
	sysFallocate: "fallocate", sysPwritev: "pwritev", sysSyncfs: "syncfs", sysSendmmsg: "sendmmsg",
	sysRenameat2: "renameat2", sysCopyFileRange: "copy_file_range", sysPwritev2: "pwritev2", sysOpenat2: "openat2"}

func callName(nr uint64) string { return callNames[nr] }
