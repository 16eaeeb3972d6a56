package powercut

import (
	"fmt"
	"strconv"
	"strings"
)

// Picture draws a state for people: every operation before the cut, in
// order, and what became of it (on disk since a sync, kept, DROPPED, or
// TORN with a map of its sectors, # kept and . lost), the syncs and the
// answers given, and where the power was cut. Runs of synced writes to one
// file are one line.
func (m *Model) Picture(st State) string {
	b := m.Barriers[st.Barrier]
	fate := map[int]Fate{}
	for k, i := range b.InFlight {
		fate[i] = st.Fates[k]
	}
	var lines []string
	for i := 0; i < b.At; i++ {
		op := m.Rec.Ops[i]
		if f, ok := fate[i]; ok {
			lines = append(lines, fmt.Sprintf("  #%-6d %-40s %s", i, m.describe(op), fateText(op, f)))
			continue
		}
		switch op.Kind {
		case Sync, DirSync, SyncAll, Out:
			lines = append(lines, fmt.Sprintf("  #%-6d %s", i, m.describe(op)))
			continue
		}
		// A synced operation: fold the run of synced writes to one file.
		j, by := i, m.syncedBy(i, b.At)
		for j+1 < b.At && sameRun(op, m.Rec.Ops[j+1]) && !isIn(fate, j+1) && m.syncedBy(j+1, b.At) == by {
			j++
		}
		what := m.describe(op)
		if j > i {
			what = fmt.Sprintf("%d writes to %s", j-i+1, m.names[op.Inode])
		}
		head := "#" + strconv.Itoa(i)
		if j > i {
			head += "-" + strconv.Itoa(j)
		}
		lines = append(lines, fmt.Sprintf("  %-7s %-40s on disk (synced by #%d)", head, what, by))
		i = j
	}
	cut := "after the program's last operation"
	if b.At < len(m.Rec.Ops) {
		cut = fmt.Sprintf("before #%d %s", b.At, m.describe(m.Rec.Ops[b.At]))
	}
	lines = append(lines, "  ---- power cut "+cut+" ----")
	return strings.Join(lines, "\n")
}

func isIn(fate map[int]Fate, i int) bool {
	_, ok := fate[i]
	return ok
}

func sameRun(a, b Op) bool { return a.Kind == Write && b.Kind == Write && a.Inode == b.Inode }

// syncedBy is the first sync after operation i (before at) that put it on disk.
func (m *Model) syncedBy(i, at int) int {
	for j := i + 1; j <= at; j++ {
		if m.synced(i, j+1) {
			return j
		}
	}
	return -1
}

func (m *Model) describe(op Op) string {
	switch op.Kind {
	case Write:
		return fmt.Sprintf("%s %s @%d+%d", op.Call, m.names[op.Inode], op.Off, len(op.Data))
	case Truncate:
		return fmt.Sprintf("%s %s to %d", op.Call, m.names[op.Inode], op.Size)
	case Create:
		return "create " + op.Name
	case Unlink:
		return "unlink " + op.Name
	case Rename:
		return fmt.Sprintf("rename %s -> %s", op.Name, op.To)
	case Sync:
		return op.Call + " " + m.names[op.Inode]
	case DirSync:
		return op.Call + " the directory"
	case SyncAll:
		return op.Call
	case Out:
		return fmt.Sprintf("%s %s %s", op.Call, op.Name, clip(string(op.Data), 60))
	}
	return op.Call
}

func fateText(op Op, f Fate) string {
	switch {
	case f.torn():
		kept := 0
		var b strings.Builder
		for _, s := range f.Sectors {
			if s {
				kept++
				b.WriteByte('#')
			} else {
				b.WriteByte('.')
			}
		}
		return fmt.Sprintf("TORN [%s] (%d of %d sectors kept)", b.String(), kept, len(f.Sectors))
	case f.Keep:
		return "kept (not synced)"
	case isDirOp(op):
		return "DROPPED (no sync of the directory after it)"
	}
	return "DROPPED (not synced)"
}

func clip(s string, n int) string {
	s = strconv.Quote(s)
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
