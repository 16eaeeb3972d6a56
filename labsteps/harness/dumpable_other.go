//go:build !linux

package harness

// notDumpable is a Linux prctl; elsewhere the judged helpers do not run
// (the lab's judged identity needs Linux).
func notDumpable() error { return nil }
