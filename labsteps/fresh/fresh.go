// Package fresh creates the files the lab writes as new files, never
// through a name someone else prepared: O_CREAT|O_EXCL|O_NOFOLLOW refuses a
// symlink, a FIFO or any file already at the name, so a graded program that
// plants one where the lab will write cannot redirect, stall or prefill the
// lab's output (issue #19: a symlink at a log's name once made the lab
// write a forged results document into its own stderr, and a FIFO at
// lab.log stalled it).
package fresh

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
)

// ErrExists is returned (wrapped) when something is already at the name:
// a file, a directory, a symlink or a FIFO.
var ErrExists = os.ErrExist

// flags open a new file for writing only, refusing anything already there.
const flags = os.O_WRONLY | os.O_CREATE | os.O_EXCL | syscall.O_NOFOLLOW | syscall.O_CLOEXEC

// Create creates path as a new empty file with mode perm and opens it for
// writing. It fails when anything is at path, a symlink included (dangling
// or not).
func Create(path string, perm os.FileMode) (*os.File, error) {
	f, err := os.OpenFile(path, flags, perm)
	if err != nil {
		return nil, fmt.Errorf("create %s afresh: %w", path, err)
	}
	return f, nil
}

// WriteFile is os.WriteFile for a new file: it fails, writing nothing,
// when anything is at path.
func WriteFile(path string, data []byte, perm os.FileMode) error {
	f, err := Create(path, perm)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	return errors.Join(err, f.Close())
}

// Replace writes path with fn through a new file of a random name in the
// same directory, renamed over path: whatever was at path (a stale report,
// a symlink, a FIFO) is replaced, never followed or opened, and a reader
// never sees half a file. It is for outputs whose names a user gives
// (--results, --junit), which may exist from an earlier run.
func Replace(path string, perm os.FileMode, fn func(io.Writer) error) error {
	var rnd [6]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return err
	}
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+"."+hex.EncodeToString(rnd[:])+".tmp")
	f, err := Create(tmp, perm)
	if err != nil {
		return err
	}
	err = fn(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// Mkdir makes path as a new directory with mode perm exactly (the umask
// does not apply); it fails when anything is at path.
func Mkdir(path string, perm os.FileMode) error {
	if err := os.Mkdir(path, perm); err != nil {
		return err
	}
	return os.Chmod(path, perm)
}
