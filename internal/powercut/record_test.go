package powercut_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"snacklab/internal/powercut"
)

// The test binary doubles as the program the recorder watches: with
// POWERCUT_HELPER set it does that helper's file operations in
// POWERCUT_ROOT and exits.
func TestMain(m *testing.M) {
	if h := os.Getenv("POWERCUT_HELPER"); h != "" {
		if err := helpers[h](os.Getenv("POWERCUT_ROOT")); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

var helpers = map[string]func(root string) error{
	// Every operation the model follows, through Go's os package.
	"files": func(root string) error {
		f, err := os.OpenFile(filepath.Join(root, "a"), os.O_CREATE|os.O_RDWR, 0o644)
		if err != nil {
			return err
		}
		if _, err := f.WriteAt([]byte("hello"), 100); err != nil {
			return err
		}
		if _, err := f.Write([]byte("xy")); err != nil { // at the file position: 0
			return err
		}
		if err := f.Sync(); err != nil {
			return err
		}
		d, err := os.Open(root)
		if err != nil {
			return err
		}
		if err := d.Sync(); err != nil {
			return err
		}
		if err := os.Rename(filepath.Join(root, "a"), filepath.Join(root, "b")); err != nil {
			return err
		}
		if err := f.Truncate(50); err != nil {
			return err
		}
		g, err := os.OpenFile(filepath.Join(root, "old"), os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			return err
		}
		if _, err := g.Write([]byte("z")); err != nil { // at the end: 3
			return err
		}
		if err := os.Remove(filepath.Join(root, "old")); err != nil {
			return err
		}
		fmt.Println("done")
		return nil
	},
	// A store through a shared mapping: no system call to record.
	"mmap": func(root string) error {
		f, err := os.OpenFile(filepath.Join(root, "old"), os.O_RDWR, 0)
		if err != nil {
			return err
		}
		b, err := syscall.Mmap(int(f.Fd()), 0, 3, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
		if err != nil {
			return err
		}
		b[0] = 'O'
		return syscall.Munmap(b)
	},
}

func record(t *testing.T, helper string) *powercut.Recording {
	t.Helper()
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "old"), []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	out, err := os.Create(filepath.Join(t.TempDir(), "stdout"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	p, err := powercut.Start([]string{exe, "-test.run=^$"}, powercut.Options{Root: root, Stdout: out,
		Env: append(os.Environ(), "POWERCUT_HELPER="+helper, "POWERCUT_ROOT="+root)})
	if errors.Is(err, powercut.ErrNoPtrace) || errors.Is(err, syscall.EPERM) {
		if os.Getenv("SNACKLAB_REQUIRE_STRACE") != "" {
			t.Fatalf("SNACKLAB_REQUIRE_STRACE is set but %v", err)
		}
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	rec, err := p.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if rec.Code != 0 {
		t.Fatalf("helper %s exited %d %s", helper, rec.Code, rec.Signal)
	}
	return rec
}

func TestRecorderSeesEveryModelledOperation(t *testing.T) {
	rec := record(t, "files")
	var got []string
	for _, op := range rec.Ops {
		s := op.Kind.String()
		switch op.Kind {
		case powercut.Create, powercut.Unlink:
			s += " " + op.Name
		case powercut.Rename:
			s += " " + op.Name + ">" + op.To
		case powercut.Write:
			s += fmt.Sprintf(" %d@%d %q", op.Inode, op.Off, op.Data)
		case powercut.Truncate:
			s += fmt.Sprintf(" %d to %d", op.Inode, op.Size)
		case powercut.Sync:
			s += fmt.Sprintf(" %d", op.Inode)
		case powercut.Out:
			s += fmt.Sprintf(" %s %q", op.Name, op.Data)
		}
		got = append(got, s)
	}
	old := rec.InitialInode["old"]
	want := []string{"create a", `write 2@100 "hello"`, `write 2@0 "xy"`, "sync 2", "dirsync", "rename a>b",
		"truncate 2 to 50", fmt.Sprintf(`write %d@3 "z"`, old), "unlink old", `out stdout "done\n"`}
	if strings.Join(got, "; ") != strings.Join(want, "; ") {
		t.Errorf("recorded:\n  %s\nwant:\n  %s", strings.Join(got, "; "), strings.Join(want, "; "))
	}
	m, err := powercut.NewModel(rec)
	if err != nil {
		t.Fatalf("the recording does not replay to the files the helper left: %v", err)
	}
	// Cut before the answer: the rename, truncate, append and unlink are
	// in flight (after the last syncs of the file and the directory).
	b := m.Barriers[len(m.Barriers)-2]
	if len(b.InFlight) != 4 {
		t.Errorf("before the answer %d operations in flight, want 4: %v", len(b.InFlight), b.InFlight)
	}
	none := make([]powercut.Fate, len(b.InFlight))
	files := m.Materialize(b, none)
	if got := files.Content["a"]; len(got) != 105 || string(got[:2]) != "xy" {
		t.Errorf("nothing in flight kept: a = %q, want the synced 105 bytes", got)
	}
	if got := string(files.Content["old"]); got != "old" {
		t.Errorf("nothing in flight kept: old = %q, want %q", got, "old")
	}
}

func TestRecorderRefusesWhatItCannotSee(t *testing.T) {
	rec := record(t, "mmap")
	if _, err := powercut.NewModel(rec); err == nil || !strings.Contains(err.Error(), "mmap") {
		t.Errorf("a store through a shared mmap: NewModel = %v, want an error naming the mmap", err)
	}
}
