// Package powercut constructs the on-disk states a power cut may leave
// behind a program, black-box: it records, with ptrace, what the program
// did to the files of one directory (every write with its offset and bytes,
// every sync, create, rename, unlink and truncate, and every answer it gave
// on stdout or a socket), then builds, under a stated persistence model, the
// file contents a power cut just before each sync or answer allows: synced
// data survives; a write after its file's last sync may be dropped, torn at
// 512-byte sectors or persisted out of order; a create, unlink or rename
// survives only after a sync of its directory. ALICE (OSDI 2014) does this
// for application-level crash consistency; docs/crash.md states the model,
// the budget of states and what is not modelled. The checks of what the
// programs make of each state belong to the caller (internal/crash).
package powercut

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// Kind is what one recorded operation does.
type Kind int

// The operations the model knows. Every other call on a file of the root
// that could change it (a shared writable mmap, link, fallocate, …) is
// recorded as Unmodelled, and a recording with one is not judged.
const (
	Create     Kind = iota + 1 // a new name in the root (open with O_CREAT that made a file)
	Write                      // bytes at an offset of an inode
	Truncate                   // an inode's size set (ftruncate, truncate, O_TRUNC)
	Unlink                     // a name removed
	Rename                     // a name moved to another (replacing it)
	Sync                       // fsync or fdatasync of an inode: its data and size are on disk
	DirSync                    // fsync of the root directory: its names are on disk
	SyncAll                    // sync or syncfs: everything is on disk
	Out                        // an answer: bytes written to stdout or sent on a socket
	Unmodelled                 // a call the model does not follow (Op.Note says which)
)

var kindNames = map[Kind]string{Create: "create", Write: "write", Truncate: "truncate", Unlink: "unlink",
	Rename: "rename", Sync: "sync", DirSync: "dirsync", SyncAll: "syncall", Out: "out", Unmodelled: "unmodelled"}

func (k Kind) String() string { return kindNames[k] }

// Op is one recorded operation, in the order the calls began.
type Op struct {
	Kind Kind   `json:"kind"`
	Call string `json:"call"` // the system call: "pwrite64", "fsync", "unlinkat", …
	TID  int    `json:"tid"`
	// Name is the file's name in the root (for Out: "stdout" or "socket");
	// To is a rename's new name.
	Name string `json:"name,omitempty"`
	To   string `json:"to,omitempty"`
	// Inode is the model's inode (not the file system's number, which a
	// new file may reuse): Write, Truncate, Sync, Create, Unlink.
	Inode int    `json:"inode,omitempty"`
	Off   int64  `json:"off,omitempty"`
	Size  int64  `json:"size,omitempty"` // Truncate's size
	Grow  bool   `json:"grow,omitempty"` // Truncate only grows (fallocate)
	Data  []byte `json:"data,omitempty"` // Write's bytes; Out's first 4 KiB
	Note  string `json:"note,omitempty"`
}

// Recording is what one program did to the files of Root.
type Recording struct {
	Root string `json:"root"`
	// Initial is every regular file of Root when the program started,
	// by name, and InitialInode the model inode of each.
	Initial      map[string][]byte `json:"-"`
	InitialInode map[string]int    `json:"initial_inode"`
	Ops          []Op              `json:"ops"`
	// Final is every regular file of Root once the program ended: the
	// recording is complete when replaying every operation gives it.
	Final map[string][]byte `json:"-"`
	// Code is the exit code, -1 when a signal (Signal) ended it.
	Code   int    `json:"code"`
	Signal string `json:"signal,omitempty"`
}

// Options configure one recorded run.
type Options struct {
	Root   string   // the directory whose files are modelled (absolute)
	Dir    string   // the program's working directory
	Env    []string // nil: this process's environment
	Stdout *os.File // nil: /dev/null
	Stderr *os.File // nil: /dev/null
}

// ErrNoPtrace means this platform has no recorder.
var ErrNoPtrace = errors.New("powercut: recording needs ptrace on linux/amd64")

// Process is a program running under the recorder.
type Process struct {
	Pid  int
	done chan struct{}
	rec  *Recording
	err  error
}

// Start starts argv under ptrace, recording what it does to opts.Root's
// files, and returns once it runs.
func Start(argv []string, opts Options) (*Process, error) {
	if len(argv) == 0 {
		return nil, errors.New("powercut: no program")
	}
	initial, err := Snapshot(opts.Root)
	if err != nil {
		return nil, fmt.Errorf("powercut: read %s: %w", opts.Root, err)
	}
	return start(argv, opts, initial)
}

// Wait waits for the process (every thread and child) to end and returns
// its recording.
func (p *Process) Wait() (*Recording, error) {
	<-p.done
	return p.rec, p.err
}

// Done is closed once the process has ended.
func (p *Process) Done() <-chan struct{} { return p.done }

// Signal sends sig to the process group.
func (p *Process) Signal(sig syscall.Signal) error { return syscall.Kill(-p.Pid, sig) }

// Snapshot reads every regular file directly in dir, by name.
func Snapshot(dir string) (map[string][]byte, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	out := map[string][]byte{}
	for _, e := range ents {
		if !e.Type().IsRegular() {
			continue
		}
		b, err := os.ReadFile(dir + "/" + e.Name())
		if err != nil {
			return nil, err
		}
		out[e.Name()] = b
	}
	return out, nil
}
