package grade

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
)

// Bounds of the work dirs kept from failing steps (the unisolated mode; an
// isolated run keeps none: its work dirs were the container's tmpfs).
const (
	maxKeptFile  = 4 << 20  // one file: its head is kept
	maxKeptTotal = 32 << 20 // one run of a submission: the largest files go first
)

// tidyLogs makes a submission's kept work dirs safe to read, archive and
// serve once its processes are dead: whatever the programs left there that
// is not a regular file or a directory — a symlink to / or /etc/passwd that
// an archiver or a web server would follow, a FIFO that blocks a reader, a
// socket — is removed, each file is cut to maxKeptFile and the run's files
// to maxKeptTotal. Files are opened without following links. What was
// removed or cut is listed in root/TIDIED.txt.
func (g *grader) tidyLogs(root string) {
	var removed []string
	type file struct {
		path string
		size int64
	}
	var files []file
	var total int64
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == root {
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		switch t := d.Type(); {
		case t.IsDir():
			return nil
		case !t.IsRegular():
			if os.Remove(p) == nil {
				removed = append(removed, fmt.Sprintf("%s: removed (%v, left by a program)", cleanLine(rel), t.Type()))
			}
		default:
			fi, err := d.Info()
			if err != nil {
				return nil
			}
			size := fi.Size()
			if size > maxKeptFile && truncate(p, maxKeptFile) == nil {
				removed = append(removed, fmt.Sprintf("%s: cut from %d to %d bytes", cleanLine(rel), size, maxKeptFile))
				size = maxKeptFile
			}
			files = append(files, file{p, size})
			total += size
		}
		return nil
	})
	sort.Slice(files, func(i, j int) bool { return files[i].size > files[j].size })
	for _, f := range files {
		if total <= maxKeptTotal {
			break
		}
		if os.Remove(f.path) == nil {
			rel, _ := filepath.Rel(root, f.path)
			removed = append(removed, fmt.Sprintf("%s: removed (%d bytes; the kept logs of a run are capped at %d MiB)", cleanLine(rel), f.size, maxKeptTotal>>20))
			total -= f.size
		}
	}
	if len(removed) > 0 {
		sort.Strings(removed)
		tidied := filepath.Join(root, "TIDIED.txt")
		os.Remove(tidied)
		if f, err := os.OpenFile(tidied, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o644); err == nil {
			f.WriteString("lab grade tidied these work dirs after the steps ended:\n" + strings.Join(removed, "\n") + "\n")
			f.Close()
		}
	}
}

// truncate cuts the regular file p to n bytes without following a link.
func truncate(p string, n int64) error {
	f, err := os.OpenFile(p, os.O_WRONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return fmt.Errorf("%s: not a regular file", p)
	}
	return f.Truncate(n)
}
