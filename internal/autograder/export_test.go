package autograder

import "context"

// SetStage replaces the build of the lab and the module cache (minutes)
// with f for a test, until restore.
func SetStage(f func(ctx context.Context, o Options, dir string) error) (restore func()) {
	old := stageFiles
	stageFiles = f
	return func() { stageFiles = old }
}
