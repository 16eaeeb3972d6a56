package powercut

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"unsafe"
)

// System call numbers of linux/amd64 the recorder decodes.
const (
	sysWrite, sysOpen, sysMmap, sysPwrite64, sysWritev          = 1, 2, 9, 18, 20
	sysSendfile, sysSendto, sysSendmsg                          = 40, 44, 46
	sysFsync, sysFdatasync, sysTruncate, sysFtruncate           = 74, 75, 76, 77
	sysRename, sysMkdir, sysRmdir, sysCreat, sysLink, sysUnlink = 82, 83, 84, 85, 86, 87
	sysSymlink, sysSync, sysOpenat, sysMkdirat, sysUnlinkat     = 88, 162, 257, 258, 263
	sysRenameat, sysLinkat, sysSymlinkat, sysSplice             = 264, 265, 266, 275
	sysFallocate, sysPwritev, sysSyncfs, sysSendmmsg            = 285, 296, 306, 307
	sysRenameat2, sysCopyFileRange, sysPwritev2, sysOpenat2     = 316, 326, 328, 437
)

const (
	atFDCWD     = -100
	atRemoveDir = 0x200
	outLimit    = 4096 // bytes of an answer kept
)

type fileID struct{ dev, ino uint64 }

// recorder turns system call entries and exits into Ops.
type recorder struct {
	root         string
	inodes       map[fileID]int // the file system's inode → the model's
	next         int
	initialInode map[string]int
	ops          []Op
	dead         map[int]bool // placeholders whose call failed or never returned
	pending      map[int]*call
}

// call is one system call between its entry and its exit.
type call struct {
	nr   uint64
	args [6]uint64
	// What the entry found out, for the exit to finish.
	name, to   string // names in the root
	existed    bool
	inode      int
	off        int64
	slot       int  // index of a placeholder Op, -1 for none
	write      bool // bytes to an inode of the root
	unmodelled string
}

func newRecorder(root string, initial map[string][]byte) (*recorder, error) {
	r := &recorder{root: filepath.Clean(root), inodes: map[fileID]int{}, initialInode: map[string]int{},
		dead: map[int]bool{}, pending: map[int]*call{}}
	for name := range initial {
		id, err := statID(filepath.Join(r.root, name), false)
		if err != nil {
			return nil, err
		}
		r.next++
		r.inodes[id] = r.next
		r.initialInode[name] = r.next
	}
	return r, nil
}

func statID(path string, follow bool) (fileID, error) {
	var st syscall.Stat_t
	var err error
	if follow {
		err = syscall.Stat(path, &st)
	} else {
		err = syscall.Lstat(path, &st)
	}
	return fileID{st.Dev, st.Ino}, err
}

// finish returns the recorded operations without the placeholders of
// calls that failed or never returned.
func (r *recorder) finish() []Op {
	for _, c := range r.pending {
		if c.slot >= 0 {
			r.dead[c.slot] = true
		}
	}
	out := []Op{}
	for i, op := range r.ops {
		if !r.dead[i] {
			out = append(out, op)
		}
	}
	return out
}

func (r *recorder) add(op Op) int {
	r.ops = append(r.ops, op)
	return len(r.ops) - 1
}

// enter decodes a call as it begins: which file it works on, and, for the
// calls whose place in the order matters as they begin (a sync covers what
// was written before it began; an answer is given as it is written), a
// placeholder Op the exit keeps or drops.
func (r *recorder) enter(tid int, nr uint64, a [6]uint64) {
	c := &call{nr: nr, args: a, slot: -1}
	r.pending[tid] = c
	switch nr {
	case sysWrite, sysPwrite64, sysWritev, sysPwritev, sysPwritev2, sysSendto, sysSendmsg, sysSendmmsg:
		fd := int(int32(a[0]))
		if out := outTarget(tid, fd); out != "" {
			c.slot = r.add(Op{Kind: Out, Call: callName(nr), TID: tid, Name: out})
			return
		}
		if nr == sysSendto || nr == sysSendmsg || nr == sysSendmmsg {
			return
		}
		inode, ok := r.fdInode(tid, fd)
		if !ok {
			return
		}
		c.write, c.inode = true, inode
		switch {
		case nr == sysPwrite64 || nr == sysPwritev || (nr == sysPwritev2 && int64(a[3]) != -1):
			c.off = int64(a[3])
		default:
			c.off = position(tid, fd)
		}
	case sysOpen, sysCreat, sysOpenat, sysOpenat2:
		r.enterOpen(tid, c)
	case sysTruncate:
		if name, ok := r.inRoot(resolve(tid, atFDCWD, a[0])); ok {
			c.name = name
			if id, err := statID(filepath.Join(r.root, name), true); err == nil {
				c.inode = r.inodes[id]
			}
		}
	case sysFtruncate, sysFallocate:
		c.inode, _ = r.fdInode(tid, int(int32(a[0])))
	case sysFsync, sysFdatasync:
		fd := int(int32(a[0]))
		if r.isRootDir(tid, fd) {
			c.slot = r.add(Op{Kind: DirSync, Call: callName(nr), TID: tid})
		} else if inode, ok := r.fdInode(tid, fd); ok {
			c.slot = r.add(Op{Kind: Sync, Call: callName(nr), TID: tid, Inode: inode})
		}
	case sysSync, sysSyncfs:
		c.slot = r.add(Op{Kind: SyncAll, Call: callName(nr), TID: tid})
	case sysUnlink, sysUnlinkat, sysRmdir:
		r.enterUnlink(tid, c)
	case sysRename, sysRenameat, sysRenameat2:
		r.enterRename(tid, c)
	case sysMmap:
		const protWrite, mapShared = 0x2, 0x1
		if a[2]&protWrite != 0 && a[3]&mapShared != 0 {
			if inode, ok := r.fdInode(tid, int(int32(a[4]))); ok {
				c.unmodelled = fmt.Sprintf("a shared writable mmap of inode %d: its stores are not system calls and cannot be recorded", inode)
			}
		}
	case sysLink, sysLinkat, sysSymlink, sysSymlinkat, sysMkdir, sysMkdirat:
		r.enterOtherPath(tid, c)
	case sysSendfile, sysSplice, sysCopyFileRange:
		fd := int(int32(a[0]))
		if nr != sysSendfile {
			fd = int(int32(a[2]))
		}
		if _, ok := r.fdInode(tid, fd); ok {
			c.unmodelled = callName(nr) + " into a file of the root: its bytes are not in the caller's memory"
		}
	default:
		delete(r.pending, tid)
	}
}

func (r *recorder) enterOpen(tid int, c *call) {
	a := c.args
	var flags uint64
	var p string
	switch c.nr {
	case sysOpen:
		p, flags = resolve(tid, atFDCWD, a[0]), a[1]
	case sysCreat:
		p, flags = resolve(tid, atFDCWD, a[0]), syscall.O_CREAT|syscall.O_WRONLY|syscall.O_TRUNC
	case sysOpenat:
		p, flags = resolve(tid, int64(int32(a[0])), a[1]), a[2]
	case sysOpenat2:
		p = resolve(tid, int64(int32(a[0])), a[1])
		if b := peek(tid, a[2], 8); len(b) == 8 {
			flags = *(*uint64)(unsafe.Pointer(&b[0]))
		}
	}
	name, ok := r.inRoot(p)
	if !ok {
		return
	}
	const oTmpfile = 0x410000
	if flags&oTmpfile == oTmpfile {
		c.unmodelled = "an O_TMPFILE file in the root"
		return
	}
	_, err := os.Lstat(filepath.Join(r.root, name))
	c.name, c.existed = name, err == nil
	c.args[5] = flags // the exit reads the flags here
}

func (r *recorder) enterUnlink(tid int, c *call) {
	a := c.args
	p, flags := resolve(tid, atFDCWD, a[0]), uint64(0)
	if c.nr == sysUnlinkat {
		p, flags = resolve(tid, int64(int32(a[0])), a[1]), a[2]
	}
	name, ok := r.inRoot(p)
	if !ok {
		return
	}
	if c.nr == sysRmdir || flags&atRemoveDir != 0 {
		c.unmodelled = "rmdir of " + name + " (directories in the root are not modelled)"
		return
	}
	c.name = name
	if id, err := statID(filepath.Join(r.root, name), false); err == nil {
		c.inode = r.inodes[id]
	}
}

func (r *recorder) enterRename(tid int, c *call) {
	a := c.args
	from, to := resolve(tid, atFDCWD, a[0]), resolve(tid, atFDCWD, a[1])
	if c.nr != sysRename {
		from, to = resolve(tid, int64(int32(a[0])), a[1]), resolve(tid, int64(int32(a[2])), a[3])
	}
	f, okF := r.inRoot(from)
	t, okT := r.inRoot(to)
	switch {
	case !okF && !okT:
		return
	case okF != okT:
		c.unmodelled = fmt.Sprintf("rename %s → %s moves a file into or out of the root", from, to)
	case c.nr == sysRenameat2 && a[4]&^1 != 0: // anything but RENAME_NOREPLACE
		c.unmodelled = "renameat2 with RENAME_EXCHANGE or RENAME_WHITEOUT"
	default:
		c.name, c.to = f, t
	}
}

func (r *recorder) enterOtherPath(tid int, c *call) {
	a := c.args
	var p string
	switch c.nr {
	case sysLink, sysSymlink:
		p = resolve(tid, atFDCWD, a[1])
	case sysMkdir:
		p = resolve(tid, atFDCWD, a[0])
	case sysMkdirat:
		p = resolve(tid, int64(int32(a[0])), a[1])
	case sysSymlinkat:
		p = resolve(tid, int64(int32(a[1])), a[2])
	case sysLinkat:
		p = resolve(tid, int64(int32(a[2])), a[3])
	}
	if name, ok := r.inRoot(p); ok {
		c.unmodelled = callName(c.nr) + " of " + name + " (only regular files, created, written, renamed and unlinked, are modelled)"
	}
}

// exit finishes a call with its return value.
func (r *recorder) exit(tid int, ret int64) {
	c, ok := r.pending[tid]
	if !ok {
		return
	}
	delete(r.pending, tid)
	if ret < 0 {
		if c.slot >= 0 {
			r.dead[c.slot] = true
		}
		return
	}
	if c.unmodelled != "" {
		r.add(Op{Kind: Unmodelled, Call: callName(c.nr), TID: tid, Note: c.unmodelled})
		return
	}
	if c.slot >= 0 {
		if r.ops[c.slot].Kind == Out {
			r.ops[c.slot].Data = readData(tid, c, int(min(ret, outLimit)))
		}
		return
	}
	switch c.nr {
	case sysWrite, sysPwrite64, sysWritev, sysPwritev, sysPwritev2:
		if c.write && ret > 0 {
			r.add(Op{Kind: Write, Call: callName(c.nr), TID: tid, Inode: c.inode, Off: c.off, Data: readData(tid, c, int(ret))})
		}
	case sysOpen, sysCreat, sysOpenat, sysOpenat2:
		r.exitOpen(tid, c, int(ret))
	case sysTruncate, sysFtruncate:
		if c.inode > 0 {
			r.add(Op{Kind: Truncate, Call: callName(c.nr), TID: tid, Inode: c.inode, Size: int64(c.args[1])})
		}
	case sysFallocate:
		const keepSize = 0x1
		switch {
		case c.inode == 0 || c.args[1] == keepSize:
		case c.args[1] == 0: // may extend the file with zeros
			r.add(Op{Kind: Truncate, Call: "fallocate", TID: tid, Inode: c.inode, Size: int64(c.args[2] + c.args[3]), Grow: true})
		default:
			r.add(Op{Kind: Unmodelled, Call: "fallocate", TID: tid, Note: fmt.Sprintf("fallocate mode %#x on inode %d", c.args[1], c.inode)})
		}
	case sysUnlink, sysUnlinkat:
		if c.name != "" {
			r.add(Op{Kind: Unlink, Call: callName(c.nr), TID: tid, Name: c.name, Inode: c.inode})
		}
	case sysRename, sysRenameat, sysRenameat2:
		if c.name != "" {
			r.add(Op{Kind: Rename, Call: callName(c.nr), TID: tid, Name: c.name, To: c.to})
		}
	}
}

func (r *recorder) exitOpen(tid int, c *call, fd int) {
	if c.name == "" {
		return
	}
	flags := c.args[5]
	id, err := statID(fmt.Sprintf("/proc/%d/fd/%d", tid, fd), true)
	if err != nil {
		return
	}
	if flags&syscall.O_CREAT != 0 && !c.existed {
		r.next++
		r.inodes[id] = r.next // a new file, even if its number was used before
		r.add(Op{Kind: Create, Call: callName(c.nr), TID: tid, Name: c.name, Inode: r.next})
		return
	}
	if flags&syscall.O_TRUNC != 0 && flags&syscall.O_ACCMODE != syscall.O_RDONLY {
		if inode, ok := r.inodes[id]; ok {
			r.add(Op{Kind: Truncate, Call: callName(c.nr) + " O_TRUNC", TID: tid, Inode: inode})
		}
	}
}

// readData reads the n bytes a write or send took from the caller.
func readData(tid int, c *call, n int) []byte {
	a := c.args
	switch c.nr {
	case sysWrite, sysPwrite64, sysSendto:
		return peek(tid, a[1], n)
	case sysWritev, sysPwritev, sysPwritev2:
		return peekIovec(tid, a[1], int(a[2]), n)
	case sysSendmsg:
		hdr := peek(tid, a[1], 32)
		if len(hdr) < 32 {
			return nil
		}
		iov := *(*uint64)(unsafe.Pointer(&hdr[16]))
		cnt := *(*uint64)(unsafe.Pointer(&hdr[24]))
		return peekIovec(tid, iov, int(cnt), n)
	}
	return nil
}
