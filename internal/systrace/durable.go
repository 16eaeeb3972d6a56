package systrace

import (
	"errors"
	"fmt"
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
func Durable(t *Trace, db string, report int, wantCommit bool) error {
	if report < 0 || report >= len(t.Calls) {
		return fmt.Errorf("durable: no call %d in a trace of %d", report, len(t.Calls))
	}
	journal := db + "-journal"
	lastDBWrite, lastJournalWrite := -1, -1
	dbSynced, journalGone := true, true
	committed := false
	for i := 0; i < report; i++ {
		c := t.Calls[i]
		if c.Errno != "" {
			continue
		}
		p := CallPath(c)
		switch {
		case IsWrite(c.Name) && p == db:
			lastDBWrite, dbSynced = i, false
		case IsWrite(c.Name) && p == journal:
			lastJournalWrite, journalGone = i, false
		case IsSync(c.Name) && p == db && !c.Unfinished:
			if lastDBWrite >= 0 && !dbSynced {
				committed = true
			}
			dbSynced = true
		case isRemove(c.Name) && p == journal && !c.Unfinished:
			journalGone = true
		}
	}
	r := t.Calls[report]
	at := fmt.Sprintf("the answer (%s #%d)", r.Name, report)
	switch {
	case !dbSynced:
		w := t.Calls[lastDBWrite]
		return fmt.Errorf("%s came after %s #%d to %s with no fsync/fdatasync of it in between: %w",
			at, w.Name, lastDBWrite, db, ErrNotDurable)
	case !journalGone:
		w := t.Calls[lastJournalWrite]
		return fmt.Errorf("%s came while the journal %s written by %s #%d was still in place (a crash then rolls the transaction back): %w",
			at, journal, w.Name, lastJournalWrite, ErrNotDurable)
	case wantCommit && !committed:
		return fmt.Errorf("%s came before any write to %s had been synced: no commit had reached the disk: %w",
			at, db, ErrNotDurable)
	}
	return nil
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
// calls that take a path (unlink, rename, truncate) the first quoted
// argument as strace printed it.
func CallPath(c Call) string {
	if c.Path != "" {
		return c.Path
	}
	a := c.Args
	i := strings.IndexByte(a, '"')
	if i < 0 {
		return ""
	}
	j := strings.IndexByte(a[i+1:], '"')
	if j < 0 {
		return ""
	}
	return a[i+1 : i+1+j]
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

// ToStdout is a report predicate: a write to descriptor 1.
func ToStdout(c Call) bool { return IsWrite(c.Name) && c.FD == 1 }

// ToSocket is a report predicate: a write or send to a socket.
func ToSocket(c Call) bool {
	p := CallPath(c)
	return IsWrite(c.Name) && (strings.HasPrefix(p, "socket:") || strings.HasPrefix(p, "TCP") || strings.HasPrefix(p, "UNIX"))
}
