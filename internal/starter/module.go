package starter

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
)

// File is one file of a learner's copy.
type File struct {
	Path string // slash path relative to the copy's root
	Mode fs.FileMode
	Data []byte
}

// Copy is a learner's copy, planned in memory so that nothing is written
// until every file has been made.
type Copy struct {
	Files   []File
	Regions []Region // in the reference
	Todos   []Todo   // the same parts, where they are in the copy
	LeftOut []string // slash paths (a trailing / for a directory) and why, "path: reason"
}

// Todo is one part the learner writes, where it is in the copy.
type Todo struct {
	File string // slash path
	Line int    // of the TODO line
	Func string // the function it is in
	Name string // the region's name
	Task string
}

// ErrNoMarkers means the module has no marked regions: it is a learner's
// copy already, or the markers were deleted.
var ErrNoMarkers = errors.New("no solution markers found")

// ErrNotEmpty means the output directory already holds something.
var ErrNotEmpty = errors.New("output directory is not empty")

// leftOut says why a path of the module is not in a learner's copy, or "".
// rel is a slash path; dir tells a directory from a file.
func leftOut(rel string, dir bool, root string) string {
	name := path.Base(rel)
	if dir {
		switch {
		case strings.HasPrefix(name, "."):
			return "version control and CI (" + name + ")"
		case rel == "bin":
			return "built executables"
		}
		if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(rel), "go.mod")); err == nil {
			return "another module (its own go.mod)"
		}
		return ""
	}
	dirName := path.Dir(rel)
	switch {
	case dirName == "labsteps/mutants" && (strings.HasSuffix(name, ".mutant") || strings.HasSuffix(name, ".variant") || name == "embedded.go"):
		return "the mutants and variants: their search texts are the reference solution"
	case dirName == "labsteps/mutants" && strings.HasSuffix(name, "_test.go"):
		return "tests of the mutants, which the copy does not have"
	case dirName == "internal/starter" && strings.HasSuffix(name, "_test.go"), rel == "cmd/lab/starter_test.go":
		return "tests of the solution markers, which the copy does not have"
	}
	return ""
}

// walkModule calls fn for every regular file of the module that a copy or
// a scan considers, and reports what it skipped through skip.
func walkModule(root string, skip func(rel, why string), fn func(rel string, d fs.DirEntry) error) error {
	return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if rel == "." {
			return nil
		}
		if why := leftOut(rel, d.IsDir(), root); why != "" {
			if d.IsDir() {
				skip(rel+"/", why)
				return filepath.SkipDir
			}
			skip(rel, why)
			return nil
		}
		if d.IsDir() || !d.Type().IsRegular() {
			return nil
		}
		return fn(rel, d)
	})
}

// ScanModule finds every marked region in the module's Go files and checks
// that region names are unique.
func ScanModule(root string) ([]Region, error) {
	var all []Region
	err := walkModule(root, func(string, string) {}, func(rel string, d fs.DirEntry) error {
		if !strings.HasSuffix(rel, ".go") {
			return nil
		}
		src, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(rel)))
		if err != nil {
			return err
		}
		rs, err := Scan(rel, src)
		if err != nil {
			return err
		}
		all = append(all, rs...)
		return nil
	})
	if err != nil {
		return nil, err
	}
	sortRegions(all)
	seen := map[string]Region{}
	for _, r := range all {
		if o, dup := seen[r.Name]; dup {
			return nil, &MarkerError{File: r.File, Line: r.Begin,
				Msg: fmt.Sprintf("region name %s is already used at %s:%d", r.Name, o.File, o.Begin)}
		}
		seen[r.Name] = r
	}
	return all, nil
}

// Plan makes the learner's copy of the module at root in memory: every file
// but those leftOut names and binary files, with each marked Go file
// transformed.
func Plan(root string) (*Copy, error) {
	regions, err := ScanModule(root)
	if err != nil {
		return nil, err
	}
	if len(regions) == 0 {
		return nil, fmt.Errorf("%w in %s: it is a learner's copy already, or the markers were removed", ErrNoMarkers, root)
	}
	c := &Copy{Regions: regions}
	marked := map[string]bool{}
	for _, r := range regions {
		marked[r.File] = true
	}
	err = walkModule(root, func(rel, why string) { c.LeftOut = append(c.LeftOut, rel+": "+why) },
		func(rel string, d fs.DirEntry) error {
			data, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(rel)))
			if err != nil {
				return err
			}
			if isBinary(data) {
				c.LeftOut = append(c.LeftOut, rel+": a binary file (build output?)")
				return nil
			}
			if marked[rel] {
				if data, err = Transform(rel, data); err != nil {
					return err
				}
				c.Todos = append(c.Todos, todos(rel, data, regions)...)
			}
			info, err := d.Info()
			if err != nil {
				return err
			}
			mode := fs.FileMode(0o644)
			if info.Mode()&0o111 != 0 {
				mode = 0o755
			}
			c.Files = append(c.Files, File{Path: rel, Mode: mode, Data: data})
			return nil
		})
	if err != nil {
		return nil, err
	}
	sort.Slice(c.Files, func(i, j int) bool { return c.Files[i].Path < c.Files[j].Path })
	return c, nil
}

// todos finds the TODO lines Transform wrote for the regions of file rel.
func todos(rel string, data []byte, regions []Region) []Todo {
	var out []Todo
	lines := strings.Split(string(data), "\n")
	for _, r := range regions {
		if r.File != rel {
			continue
		}
		for i, l := range lines {
			if strings.HasPrefix(strings.TrimSpace(l), "// TODO("+r.Name+"):") {
				out = append(out, Todo{File: rel, Line: i + 1, Func: r.Func, Name: r.Name, Task: r.Task})
				break
			}
		}
	}
	return out
}

// isBinary uses git's rule: a NUL byte in the first 8000 bytes.
func isBinary(b []byte) bool {
	return bytes.IndexByte(b[:min(len(b), 8000)], 0) >= 0
}

// CheckOut reports whether dir can take a copy: it must be missing or an
// empty directory.
func CheckOut(dir string) error {
	_, err := checkOut(dir)
	return err
}

func checkOut(dir string) (missing bool, err error) {
	switch entries, rerr := os.ReadDir(dir); {
	case errors.Is(rerr, fs.ErrNotExist):
		return true, nil
	case rerr != nil:
		if fi, serr := os.Stat(dir); serr == nil && !fi.IsDir() {
			return false, fmt.Errorf("%w: %s is a file", ErrNotEmpty, dir)
		}
		return false, rerr
	case len(entries) > 0:
		names := make([]string, 0, 3)
		for _, e := range entries[:min(3, len(entries))] {
			names = append(names, e.Name())
		}
		more := ""
		if len(entries) > 3 {
			more = ", …"
		}
		return false, fmt.Errorf("%w: %s holds %d entries (%s%s)", ErrNotEmpty, dir, len(entries), strings.Join(names, ", "), more)
	}
	return false, nil
}

// Write writes the copy into dir, which must be missing or empty. On any
// failure it removes what it wrote.
func (c *Copy) Write(dir string) (err error) {
	created, err := checkOut(dir)
	if err != nil {
		return err
	}
	if created {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	defer func() {
		if err == nil {
			return
		}
		if created {
			os.RemoveAll(dir)
			return
		}
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			os.RemoveAll(filepath.Join(dir, e.Name()))
		}
	}()
	for _, f := range c.Files {
		p := filepath.Join(dir, filepath.FromSlash(f.Path))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, f.Data, f.Mode); err != nil {
			return err
		}
	}
	return nil
}

// StripModule overwrites each marked Go file under dir (a copy of the
// module) with its markers stripped, and returns how many files it changed.
func StripModule(dir string) (int, error) {
	regions, err := ScanModule(dir)
	if err != nil {
		return 0, err
	}
	files := map[string]bool{}
	for _, r := range regions {
		files[r.File] = true
	}
	for rel := range files {
		p := filepath.Join(dir, filepath.FromSlash(rel))
		src, err := os.ReadFile(p)
		if err != nil {
			return 0, err
		}
		out, err := Strip(rel, src)
		if err != nil {
			return 0, err
		}
		if err := os.WriteFile(p, out, 0o644); err != nil {
			return 0, err
		}
	}
	return len(files), nil
}
