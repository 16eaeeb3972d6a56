package main

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"snacklab/internal/grade"
	"snacklab/labsteps"
	"snacklab/labsteps/fresh"
	"snacklab/labsteps/report"
	"snacklab/labsteps/result"
)

// checkOutputs refuses report paths that cannot be written, before any step
// runs: a run of every step that then fails to save its results wastes the
// learner's minutes and loses the results. A path that exists must not be a
// directory, and a regular file must open for writing (it is not truncated
// here); a device or pipe (--results /dev/stderr, as the isolated runner
// passes) is taken as it is. A new path's directory must exist and take a
// new file.
func checkOutputs(flags map[string]string) error {
	for _, name := range slices.Sorted(maps.Keys(flags)) {
		path := flags[name]
		if path == "" || path == "-" {
			continue
		}
		if fi, err := os.Stat(path); err == nil {
			switch {
			case fi.IsDir():
				return usageErr{fmt.Sprintf("--%s %s is a directory; want a file path. Nothing was run", name, path)}
			case fi.Mode().IsRegular():
				f, err := os.OpenFile(path, os.O_WRONLY, 0)
				if err != nil {
					return usageErr{fmt.Sprintf("--%s %s: cannot write it (%v). Nothing was run", name, path, err)}
				}
				f.Close()
			}
			continue
		}
		dir := filepath.Dir(path)
		fi, err := os.Stat(dir)
		if err != nil || !fi.IsDir() {
			return usageErr{fmt.Sprintf("--%s %s: directory %s does not exist; create it or choose another path. Nothing was run", name, path, dir)}
		}
		f, err := os.CreateTemp(dir, ".lab-write-check-*")
		if err != nil {
			return usageErr{fmt.Sprintf("--%s %s: cannot write in %s (%v). Nothing was run", name, path, dir, err)}
		}
		f.Close()
		os.Remove(f.Name())
	}
	return nil
}

// resolveBin is the directory of the executables under test: bin, or the
// directory of this program when bin is "", made absolute and checked.
func resolveBin(bin string) (string, error) {
	if bin == "" {
		exe, err := os.Executable()
		if err != nil {
			return "", err
		}
		bin = filepath.Dir(exe)
	}
	bin, err := filepath.Abs(bin)
	if err != nil {
		return "", err
	}
	if err := labsteps.CheckBin(bin); err != nil {
		return "", usageErr{err.Error()}
	}
	return bin, nil
}

func writeReports(o options, results []result.Result, took time.Duration) error {
	write := func(path string, fn func(io.Writer) error) error {
		if path == "" {
			return nil
		}
		if !isDevice(path) {
			// A new file renamed over the name: whatever was there is
			// replaced, never written through.
			return fresh.Replace(path, 0o644, fn)
		}
		return writeDevice(path, fn)
	}
	return errors.Join(
		write(o.results, func(w io.Writer) error { return report.WriteGradescope(w, results, took) }),
		write(o.junit, func(w io.Writer) error { return report.WriteJUnit(w, results, took) }),
		write(o.jsonOut, func(w io.Writer) error { return result.Encode(w, results) }),
		write(o.html, func(w io.Writer) error {
			return report.WriteHTML(w, report.HTMLReport{Title: "snacklab lab report", Bin: o.bin, When: time.Now(),
				Took: took, Results: results, Points: grade.DefaultPoints()})
		}),
	)
}

// writeDevice writes a device or pipe the caller named (a grading container
// reads the results from /dev/stderr) as it is, never creating it.
func writeDevice(path string, fn func(io.Writer) error) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	if err := fn(f); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	return f.Close()
}

// isDevice: path is under /dev, or names a device or a FIFO.
func isDevice(path string) bool {
	if strings.HasPrefix(filepath.Clean(path), "/dev/") {
		return true
	}
	fi, err := os.Lstat(path)
	return err == nil && fi.Mode()&(os.ModeDevice|os.ModeCharDevice|os.ModeNamedPipe) != 0
}
