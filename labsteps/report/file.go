package report

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"snacklab/labsteps/fresh"
)

// WriteFile writes path with fn, creating its directory, through a new file
// renamed over path (fresh.Replace): a reader never sees half a report, and
// a link or FIFO planted at path is replaced, never followed.
func WriteFile(path string, fn func(io.Writer) error) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	if err := fresh.Replace(path, 0o644, fn); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
