package main

import (
	"fmt"
	"os"
	"path/filepath"
)

// checkOutputs refuses report paths that cannot be written, before any step
// runs: a run of every step that then fails to save its results wastes the
// learner's minutes and loses the results. Each path's directory must exist
// and take a new file; the path itself must not be a directory.
func checkOutputs(flags map[string]string) error {
	for _, name := range []string{"results", "junit", "html"} {
		path := flags[name]
		if path == "" {
			continue
		}
		if fi, err := os.Stat(path); err == nil && fi.IsDir() {
			return usageErr{fmt.Sprintf("--%s %s is a directory; want a file path. Nothing was run", name, path)}
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
