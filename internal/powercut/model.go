package powercut

import (
	"bytes"
	"fmt"
	"sort"
	"strings"
)

// SectorSize is the unit a torn write is cut at: a disk writes 512-byte
// sectors atomically (or says it does), nothing larger.
const SectorSize = 512

// Model is a recording read under the persistence model (docs/crash.md):
//
//   - a write or truncate of a file reaches the disk by its file's next
//     fsync/fdatasync (or a sync/syncfs); until then a power cut may drop
//     it, keep it, or keep some of its 512-byte sectors, independently of
//     the other writes (so out of order);
//   - a create, unlink or rename reaches the disk by the next fsync of its
//     directory (or sync/syncfs); until then a power cut keeps those of the
//     directory in the order they were made, up to some point (journaling
//     file systems commit their metadata in order);
//   - everything else the program did (reads, closes, sync_file_range,
//     which syncs no metadata and flushes no disk cache) changes nothing.
//
// A power cut is considered just before each sync and each answer (the
// barriers): every state a cut between two barriers can leave is also one
// a cut just before the later barrier can leave, with the same answers
// given, so nothing is lost by looking only there.
type Model struct {
	Rec      *Recording
	Barriers []Barrier
	names    map[int]string // inode → its (last) name, for people
	touched  []string       // every name the recording creates, writes, truncates, renames or unlinks
}

// Barrier is one place a power cut is considered: before Ops[At] (At =
// len(Ops): after the program's last operation).
type Barrier struct {
	At int `json:"at"`
	// InFlight are the operations whose fate is open there, in order:
	// writes and truncates after their file's last sync, creates, unlinks
	// and renames after their directory's last sync.
	InFlight []int `json:"in_flight"`
	// Answers are the Out operations before At: what the program had said.
	Answers []int `json:"answers"`
}

// NewModel reads a recording. It refuses one with an operation the model
// does not follow, and one whose replay does not give the files the
// program left (something wrote them that the recorder did not see).
func NewModel(rec *Recording) (*Model, error) {
	m := &Model{Rec: rec, names: map[int]string{}}
	for name, inode := range rec.InitialInode {
		m.names[inode] = name
	}
	for i, op := range rec.Ops {
		switch op.Kind {
		case Unmodelled:
			return nil, fmt.Errorf("operation #%d (%s) is not modelled: %s", i, op.Call, op.Note)
		case Create:
			m.names[op.Inode] = op.Name
		case Rename:
			for inode, n := range m.names {
				if n == op.Name {
					m.names[inode] = op.To
				}
			}
		}
	}
	touched := map[string]bool{}
	for _, op := range rec.Ops {
		switch op.Kind {
		case Create, Unlink:
			touched[op.Name] = true
		case Rename:
			touched[op.Name], touched[op.To] = true, true
		case Write, Truncate:
			touched[m.names[op.Inode]] = true
		}
	}
	for name := range touched {
		m.touched = append(m.touched, name)
	}
	sort.Strings(m.touched)
	for i, op := range rec.Ops {
		if op.Kind == Sync || op.Kind == DirSync || op.Kind == SyncAll || op.Kind == Out {
			m.Barriers = append(m.Barriers, m.barrier(i))
		}
	}
	m.Barriers = append(m.Barriers, m.barrier(len(rec.Ops)))
	if err := m.selfCheck(); err != nil {
		return nil, err
	}
	return m, nil
}

func (m *Model) barrier(at int) Barrier {
	b := Barrier{At: at, InFlight: []int{}, Answers: []int{}}
	for i := 0; i < at; i++ {
		switch op := m.Rec.Ops[i]; op.Kind {
		case Out:
			b.Answers = append(b.Answers, i)
		case Write, Truncate, Create, Unlink, Rename:
			if !m.synced(i, at) {
				b.InFlight = append(b.InFlight, i)
			}
		}
	}
	return b
}

// synced says whether operation i is on disk by the time of Ops[at]: a
// sync of its file (data) or of the directory (names) came after it.
func (m *Model) synced(i, at int) bool {
	op := m.Rec.Ops[i]
	for j := i + 1; j < at; j++ {
		s := m.Rec.Ops[j]
		switch {
		case s.Kind == SyncAll:
			return true
		case s.Kind == Sync && (op.Kind == Write || op.Kind == Truncate) && s.Inode == op.Inode:
			return true
		case s.Kind == DirSync && (op.Kind == Create || op.Kind == Unlink || op.Kind == Rename):
			return true
		}
	}
	return false
}

// Fate is what a power cut did to one in-flight operation: kept whole,
// dropped, or, for a write, torn: Sectors says which of its sectors (from
// the one holding its first byte) reached the disk.
type Fate struct {
	Keep    bool   `json:"keep"`
	Sectors []bool `json:"sectors,omitempty"`
}

func (f Fate) torn() bool { return f.Sectors != nil }

// sectors is how many sectors a write touches.
func sectors(op Op) int {
	if op.Kind != Write || len(op.Data) == 0 {
		return 1
	}
	first, last := op.Off/SectorSize, (op.Off+int64(len(op.Data))-1)/SectorSize
	return int(last - first + 1)
}

// Files is what a state leaves on disk: the content of every name the
// recording touches (at any time) that exists there; a touched name
// missing from Content does not exist. Other names are the caller's.
type Files struct {
	Content map[string][]byte
	Touched []string // sorted; Model.Touched
}

// Materialize builds the files a power cut at barrier b leaves when the
// in-flight operations met fates (one per b.InFlight; nil: all kept).
func (m *Model) Materialize(b Barrier, fates []Fate) Files {
	fate := map[int]Fate{}
	for k, i := range b.InFlight {
		f := Fate{Keep: true}
		if fates != nil {
			f = fates[k]
		}
		fate[i] = f
	}
	content := map[int][]byte{}
	names := map[string]int{}
	for name, inode := range m.Rec.InitialInode {
		names[name] = inode
		content[inode] = append([]byte(nil), m.Rec.Initial[name]...)
	}
	dirCut := false // an in-flight directory operation was dropped: so are the later ones
	for i := 0; i < b.At; i++ {
		op := m.Rec.Ops[i]
		f, inFlight := fate[i]
		if !inFlight {
			f = Fate{Keep: true}
		}
		switch op.Kind {
		case Create, Unlink, Rename:
			if inFlight && (dirCut || !f.Keep) {
				dirCut = true
				continue
			}
			applyName(names, content, op)
		case Write:
			if f.Keep || f.torn() {
				content[op.Inode] = applyWrite(content[op.Inode], op, f)
			}
		case Truncate:
			if f.Keep {
				content[op.Inode] = resize(content[op.Inode], op)
			}
		}
	}
	files := Files{Content: map[string][]byte{}, Touched: m.touched}
	for _, name := range m.touched {
		if inode, ok := names[name]; ok {
			files.Content[name] = content[inode]
		}
	}
	return files
}

func applyName(names map[string]int, content map[int][]byte, op Op) {
	switch op.Kind {
	case Create:
		names[op.Name] = op.Inode
		if _, ok := content[op.Inode]; !ok {
			content[op.Inode] = []byte{}
		}
	case Unlink:
		delete(names, op.Name)
	case Rename:
		if inode, ok := names[op.Name]; ok {
			names[op.To] = inode
			delete(names, op.Name)
		}
	}
}

// applyWrite writes op's kept sectors into b, growing it (with zeros where
// nothing was written) to the end of the last byte kept.
func applyWrite(b []byte, op Op, f Fate) []byte {
	first := op.Off / SectorSize
	for s := 0; s < sectors(op); s++ {
		if f.torn() && !f.Sectors[s] {
			continue
		}
		lo := max(op.Off, (first+int64(s))*SectorSize)
		hi := min(op.Off+int64(len(op.Data)), (first+int64(s)+1)*SectorSize)
		if int64(len(b)) < hi {
			b = append(b, make([]byte, hi-int64(len(b)))...)
		}
		copy(b[lo:hi], op.Data[lo-op.Off:hi-op.Off])
	}
	return b
}

func resize(b []byte, op Op) []byte {
	size := op.Size
	if op.Grow {
		size = max(size, int64(len(b)))
	}
	if int64(len(b)) >= size {
		return b[:size]
	}
	return append(b, make([]byte, size-int64(len(b)))...)
}

// selfCheck replays every operation and compares with the files the
// program left: a difference means something wrote them that the recorder
// did not see (another process, a shared mmap), and no state built from
// the recording could be trusted.
func (m *Model) selfCheck() error {
	end := m.Barriers[len(m.Barriers)-1]
	got := m.Materialize(end, nil)
	var bad []string
	for _, name := range got.Touched {
		g, gok := got.Content[name]
		f, fok := m.Rec.Final[name]
		switch {
		case gok != fok:
			bad = append(bad, fmt.Sprintf("%s exists after replay: %v, after the run: %v", name, gok, fok))
		case !bytes.Equal(g, f):
			bad = append(bad, fmt.Sprintf("%s has %d bytes after replay, %d after the run (first difference at byte %d)", name, len(g), len(f), firstDiff(g, f)))
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("the recording does not account for the files the program left (did another process, or a shared mmap, write them?): %s", strings.Join(bad, "; "))
	}
	return nil
}

func firstDiff(a, b []byte) int {
	for i := 0; i < min(len(a), len(b)); i++ {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// Name is the name of an inode for people (its last name).
func (m *Model) Name(inode int) string { return m.names[inode] }

// Touched lists every name the recording creates, writes, truncates,
// renames or unlinks, sorted: the files a state decides.
func (m *Model) Touched() []string { return m.touched }
