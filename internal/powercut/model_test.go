package powercut_test

import (
	"bytes"
	"reflect"
	"strings"
	"testing"

	"snacklab/internal/powercut"
)

// commit is a rollback-journal commit as SQLite makes it with
// synchronous=FULL: the journal created, written and synced (with its
// directory), the database written and synced, the journal unlinked, and
// the answer printed; no sync of the directory after the unlink.
func commit(extra bool) *powercut.Recording {
	db := bytes.Repeat([]byte{'o'}, 1024)
	ops := []powercut.Op{
		{Kind: powercut.Create, Call: "open", Name: "q.db-journal", Inode: 2},
		{Kind: powercut.Write, Call: "pwrite64", Inode: 2, Off: 0, Data: bytes.Repeat([]byte{'j'}, 1024)},
		{Kind: powercut.Sync, Call: "fsync", Inode: 2},
		{Kind: powercut.DirSync, Call: "fsync"},
		{Kind: powercut.Write, Call: "pwrite64", Inode: 1, Off: 0, Data: bytes.Repeat([]byte{'n'}, 1024)},
		{Kind: powercut.Sync, Call: "fsync", Inode: 1},
		{Kind: powercut.Unlink, Call: "unlink", Name: "q.db-journal", Inode: 2},
	}
	if extra {
		ops = append(ops, powercut.Op{Kind: powercut.DirSync, Call: "fsync"})
	}
	ops = append(ops, powercut.Op{Kind: powercut.Out, Call: "write", Name: "stdout", Data: []byte("accepted\n")})
	return &powercut.Recording{Root: "/w", Initial: map[string][]byte{"q.db": db}, InitialInode: map[string]int{"q.db": 1},
		Ops: ops, Final: map[string][]byte{"q.db": bytes.Repeat([]byte{'n'}, 1024)}}
}

func model(t *testing.T, rec *powercut.Recording) *powercut.Model {
	t.Helper()
	m, err := powercut.NewModel(rec)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// With synchronous=FULL the journal's unlink is still in flight after the
// answer: a cut there may bring the hot journal back. With EXTRA it is not.
func TestUnlinkWithoutDirectorySyncIsInFlightAfterTheAnswer(t *testing.T) {
	for _, tc := range []struct {
		extra        bool
		wantBarriers int
		wantInFlight int
	}{{false, 5, 1}, {true, 6, 0}} {
		m := model(t, commit(tc.extra))
		if len(m.Barriers) != tc.wantBarriers {
			t.Fatalf("extra %v: %d barriers, want %d", tc.extra, len(m.Barriers), tc.wantBarriers)
		}
		end := m.Barriers[len(m.Barriers)-1]
		if len(end.Answers) != 1 || len(end.InFlight) != tc.wantInFlight {
			t.Fatalf("extra %v: at the end %d answers, in flight %v; want 1 answer, %d in flight", tc.extra, len(end.Answers), end.InFlight, tc.wantInFlight)
		}
		if tc.extra {
			continue
		}
		lost := m.Materialize(end, []powercut.Fate{{Keep: false}})
		if got := string(lost.Content["q.db-journal"]); got != strings.Repeat("j", 1024) {
			t.Errorf("unlink dropped: journal = %.10q… (%d bytes), want the synced journal back", got, len(got))
		}
		if got := lost.Content["q.db"][0]; got != 'n' {
			t.Errorf("unlink dropped: q.db starts %q, want the synced new content", got)
		}
		kept := m.Materialize(end, nil)
		if _, ok := kept.Content["q.db-journal"]; ok {
			t.Error("unlink kept: the journal is still there")
		}
		if !reflect.DeepEqual(kept.Touched, []string{"q.db", "q.db-journal"}) {
			t.Errorf("touched = %v", kept.Touched)
		}
	}
}

// Before the database's fsync its write may be dropped or torn; before
// the directory's fsync the journal's creation may be lost.
func TestBarriersBeforeEachSync(t *testing.T) {
	m := model(t, commit(false))
	want := [][]int{{0, 1}, {0}, {4}, {6}, {6}}
	for i, b := range m.Barriers {
		if !reflect.DeepEqual(b.InFlight, want[i]) {
			t.Errorf("barrier %d (before op %d): in flight %v, want %v", i, b.At, b.InFlight, want[i])
		}
	}
	torn := m.Materialize(m.Barriers[2], []powercut.Fate{{Sectors: []bool{true, false}}})
	if got, want := string(torn.Content["q.db"]), strings.Repeat("n", 512)+strings.Repeat("o", 512); got != want {
		t.Errorf("torn write: q.db = %.20q…, want the first sector new, the second old", got)
	}
	noJournal := m.Materialize(m.Barriers[1], []powercut.Fate{{Keep: false}})
	if _, ok := noJournal.Content["q.db-journal"]; ok {
		t.Error("create dropped: the journal exists")
	}
}

// A write past the end that is torn leaves zeros where its lost sectors
// were, and the file ends at its last kept byte.
func TestTornWriteAtAnOffset(t *testing.T) {
	rec := &powercut.Recording{Initial: map[string][]byte{"f": []byte("abc")}, InitialInode: map[string]int{"f": 1},
		Ops: []powercut.Op{{Kind: powercut.Write, Call: "pwrite64", Inode: 1, Off: 256, Data: bytes.Repeat([]byte{'x'}, 1024)}}}
	rec.Final = map[string][]byte{"f": append(append([]byte("abc"), make([]byte, 253)...), bytes.Repeat([]byte{'x'}, 1024)...)}
	m := model(t, rec)
	end := m.Barriers[0]
	got := m.Materialize(end, []powercut.Fate{{Sectors: []bool{true, false, true}}}).Content["f"]
	want := append(append([]byte("abc"), make([]byte, 253)...), bytes.Repeat([]byte{'x'}, 256)...)
	want = append(append(want, make([]byte, 512)...), bytes.Repeat([]byte{'x'}, 256)...)
	if !bytes.Equal(got, want) {
		t.Errorf("torn [#.#] write @256+1024: %d bytes, want %d (x in sectors 0 and 2, zeros in 1)", len(got), len(want))
	}
	if got := m.Materialize(end, []powercut.Fate{{Sectors: []bool{true, false, false}}}).Content["f"]; len(got) != 512 {
		t.Errorf("torn [#..]: file is %d bytes, want 512 (it ends at the last kept byte)", len(got))
	}
}

// Directory operations reach the disk in order: a later one is never kept
// when an earlier one is dropped.
func TestDirectoryOperationsKeepTheirOrder(t *testing.T) {
	rec := &powercut.Recording{Initial: map[string][]byte{}, InitialInode: map[string]int{},
		Ops: []powercut.Op{
			{Kind: powercut.Create, Call: "open", Name: "a", Inode: 1},
			{Kind: powercut.Rename, Call: "rename", Name: "a", To: "b"},
		}, Final: map[string][]byte{"b": {}}}
	m := model(t, rec)
	for _, s := range m.States(0, powercut.Full, 1) {
		if !s.Fates[0].Keep && s.Fates[1].Keep {
			t.Errorf("state %q keeps the rename without the create", s.Label)
		}
	}
	if n := len(m.States(0, powercut.Full, 1)); n != 3 {
		t.Errorf("%d states of two directory operations, want 3 (none, the create, both)", n)
	}
}

// The states of a barrier are a function of the recording's shape, the
// budget and the seed: the same again, another seed other samples.
func TestStatesAreReplayable(t *testing.T) {
	rec := &powercut.Recording{Initial: map[string][]byte{}, InitialInode: map[string]int{}, Final: map[string][]byte{}}
	rec.Ops = append(rec.Ops, powercut.Op{Kind: powercut.Create, Call: "open", Name: "j", Inode: 1})
	for i := 0; i < 12; i++ {
		rec.Ops = append(rec.Ops, powercut.Op{Kind: powercut.Write, Call: "pwrite64", Inode: 1, Off: int64(i) * 1024, Data: bytes.Repeat([]byte{byte('a' + i)}, 1024)})
	}
	var final []byte
	for i := 0; i < 12; i++ {
		final = append(final, bytes.Repeat([]byte{byte('a' + i)}, 1024)...)
	}
	rec.Final["j"] = final
	m := model(t, rec)
	a, b, c := m.States(0, powercut.Small, 7), m.States(0, powercut.Small, 7), m.States(0, powercut.Small, 8)
	if !reflect.DeepEqual(a, b) {
		t.Error("the same seed gave other states")
	}
	if reflect.DeepEqual(a, c) {
		t.Error("another seed gave the same samples")
	}
	full := m.States(0, powercut.Full, 7)
	if len(full) <= len(a) {
		t.Errorf("full budget %d states, small %d: want more", len(full), len(a))
	}
	for i, s := range a {
		if s.Index != i || len(s.Fates) != 13 {
			t.Fatalf("state %d: index %d, %d fates", i, s.Index, len(s.Fates))
		}
	}
	// 13 in flight, too many to combine: everything, nothing, 13 each
	// dropped, 12 tears, 2 samples, less the duplicates.
	if len(a) < 20 || len(a) > 30 {
		t.Errorf("%d small states, want 20…30", len(a))
	}
}

// A recording that does not account for the files the program left, or
// holds an operation the model does not follow, is refused.
func TestIncompleteRecordingsAreRefused(t *testing.T) {
	rec := commit(false)
	rec.Final["q.db"] = []byte("written by someone else")
	if _, err := powercut.NewModel(rec); err == nil || !strings.Contains(err.Error(), "q.db has") {
		t.Errorf("a final file the replay does not give: %v, want an error naming q.db", err)
	}
	rec = commit(false)
	rec.Ops = append(rec.Ops, powercut.Op{Kind: powercut.Unmodelled, Call: "mmap", Note: "a shared writable mmap"})
	if _, err := powercut.NewModel(rec); err == nil || !strings.Contains(err.Error(), "mmap") {
		t.Errorf("an unmodelled mmap: %v, want an error naming it", err)
	}
}

// The picture says what became of each operation and where the cut fell.
func TestPicture(t *testing.T) {
	m := model(t, commit(false))
	end := len(m.Barriers) - 1
	st := m.States(end, powercut.Small, 1)
	var lost powercut.State
	for _, s := range st {
		if !s.Fates[0].Keep {
			lost = s
		}
	}
	pic := m.Picture(lost)
	for _, want := range []string{"unlink q.db-journal", "DROPPED (no sync of the directory after it)", "on disk (synced by #2)", `write stdout "accepted\n"`, "power cut after the program's last operation"} {
		if !strings.Contains(pic, want) {
			t.Errorf("picture lacks %q:\n%s", want, pic)
		}
	}
}
