package systrace

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
)

// ErrNotDurable is wrapped by Durable's verdicts: an answer left the
// process before the commit it reports had reached the disk.
var ErrNotDurable = errors.New("reported before the commit reached the disk")

// Durable judges one answer of a process that keeps its state in the
// SQLite file db with a rollback journal (db + "-journal", CONTRACT §2):
// at the call t.Calls[report] (the write of the answer to stdout, or the
// send of an HTTP response), everything written to db and its journal
// before it must already be on disk. That is, in trace order, before the
// answer:
//
//   - every write to db is followed by an fsync or fdatasync of db;
//   - every write to the journal is followed by the journal's removal
//     (unlink, rename, truncate): a journal left in place is a hot journal
//     and the next open rolls the transaction back;
//   - with wantCommit, at least one write to db was synced: an answer that
//     promises a change with no commit before it promised too early.
//
// A rollback-journal commit with synchronous=FULL does exactly this; so
// does any other correct sequence. What it does not require is an fsync
// of the directory after the journal's removal (synchronous=EXTRA): the
// contract asks for FULL. It is a pure function of the trace, shared by
// the lab's durability step and `lab crash`.
func Durable(t *Trace, db string, report int, wantCommit bool) (Commit, error) {
	c := Commit{Write: -1, Sync: -1, JournalGone: -1}
	if report < 0 || report >= len(t.Calls) {
		return c, fmt.Errorf("durable: no call %d in a trace of %d", report, len(t.Calls))
	}
	journal := db + "-journal"
	lastJournalWrite := -1
	dbSynced, journalGone := true, true
	committed := false
	for i := 0; i < report; i++ {
		call := t.Calls[i]
		if call.Errno != "" {
			continue
		}
		p := CallPath(call)
		switch {
		case IsWrite(call.Name) && sameFile(p, db):
			c.Write, c.Sync, c.JournalGone, dbSynced = i, -1, -1, false
		case IsWrite(call.Name) && sameFile(p, journal):
			lastJournalWrite, journalGone = i, false
		case IsSync(call.Name) && sameFile(p, db) && !call.Unfinished:
			if c.Write >= 0 && !dbSynced {
				committed, c.Sync = true, i
			}
			dbSynced = true
		case isRemove(call.Name) && sameFile(p, journal) && !call.Unfinished:
			journalGone = true
			if c.Sync >= 0 && c.JournalGone < 0 {
				c.JournalGone = i
			}
		}
	}
	r := t.Calls[report]
	at := fmt.Sprintf("the answer (%s #%d)", r.Name, report)
	switch {
	case !dbSynced:
		w := t.Calls[c.Write]
		return c, fmt.Errorf("%s came after %s #%d to %s with no fsync/fdatasync of it in between (synchronous=OFF?): a power cut can lose what it reports: %w",
			at, w.Name, c.Write, db, ErrNotDurable)
	case !journalGone:
		w := t.Calls[lastJournalWrite]
		return c, fmt.Errorf("%s came while the journal %s written by %s #%d was still in place: with a rollback journal, deleting it is the commit, and a crash now rolls the transaction back: %w",
			at, journal, w.Name, lastJournalWrite, ErrNotDurable)
	case wantCommit && !committed:
		return c, fmt.Errorf("%s came before any write to %s had been synced: no commit had reached the disk (printed before the commit, or inside a transaction still open): %w",
			at, db, ErrNotDurable)
	}
	return c, nil
}

// Commit is where Durable found the commit an answer came after, as
// indexes into Trace.Calls (-1 for none): the last write to the database
// file, the fsync or fdatasync after it, and the journal's removal after
// that (-1 when the journal was already gone, or never existed).
type Commit struct{ Write, Sync, JournalGone int }

// sameFile says whether p, a path from a trace, names the file at the
// absolute path abs. A program may name its files relative to its working
// directory ("q.db-journal", "./q.db-journal"), which the trace shows as
// given: such a path names abs when abs ends with it.
func sameFile(p, abs string) bool {
	if p == abs {
		return true
	}
	rel := strings.TrimPrefix(p, "./")
	return rel != "" && !filepath.IsAbs(p) && strings.HasSuffix(abs, "/"+rel)
}

// IsWrite says whether name is a system call that writes data to a
// descriptor.
func IsWrite(name string) bool {
	switch name {
	case "write", "pwrite64", "pwrite", "writev", "pwritev", "pwritev2", "sendto", "sendmsg":
		return true
	}
	return false
}

// IsSync says whether name makes a file's data durable.
func IsSync(name string) bool {
	return name == "fsync" || name == "fdatasync" || name == "sync_file_range"
}

func isRemove(name string) bool {
	switch name {
	case "unlink", "unlinkat", "rename", "renameat", "renameat2", "truncate", "ftruncate":
		return true
	}
	return false
}

// CallPath is the file a call works on: its descriptor's file, or for
// calls that take a path (unlink, rename, truncate and their *at forms) that
// path. A trace read from strace has it as the first quoted argument, for the
// *at forms relative to the directory descriptor strace printed
// (unlinkat(5</w>, "q.db-journal", 0) is /w/q.db-journal); KillAt resolves
// it itself into Path and keeps no arguments.
func CallPath(c Call) string {
	quoted := ""
	if i := strings.IndexByte(c.Args, '"'); i >= 0 {
		if j := strings.IndexByte(c.Args[i+1:], '"'); j >= 0 {
			quoted = c.Args[i+1 : i+1+j]
		}
	}
	switch c.Name {
	case "unlink", "rename", "truncate":
		if quoted == "" {
			return c.Path
		}
		return quoted
	case "unlinkat", "renameat", "renameat2":
		if quoted == "" || (c.Path != "" && !filepath.IsAbs(quoted)) {
			return filepath.Join(c.Path, quoted)
		}
		return quoted
	}
	if c.Path != "" {
		return c.Path
	}
	return quoted
}

// FirstReport is the index of the first call for which isReport is true,
// -1 if none: typically the write of the answer to stdout (FD 1) or of an
// HTTP response to a socket.
func FirstReport(t *Trace, isReport func(Call) bool) int {
	for i, c := range t.Calls {
		if isReport(c) {
			return i
		}
	}
	return -1
}

// ToStdout is a report predicate: a write to descriptor 1. It is right only
// when the traced program starts no other process: a wrapper's or a shim's
// command substitution writes to a descriptor 1 of its own. Where the pipe
// is known, ToFile(PipeName(…)) judges the program's output itself.
func ToStdout(c Call) bool { return IsWrite(c.Name) && c.FD == 1 }

// ToSocket is a report predicate: a write or send to a socket.
func ToSocket(c Call) bool {
	p := CallPath(c)
	return IsWrite(c.Name) && (strings.HasPrefix(p, "socket:") || strings.HasPrefix(p, "TCP") || strings.HasPrefix(p, "UNIX"))
}
