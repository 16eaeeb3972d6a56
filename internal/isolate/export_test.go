package isolate

import "context"

// Marker is the line the lab writes first on stderr when isolated.
const Marker = isolatedMarker

// Stage runs the staging of a submission's programs.
func Stage(parent, dir string) (root, sub, problem string, err error) {
	st, problem, err := stageSubmission(parent, dir)
	return st.root, st.sub, problem, err
}

// Interpret is what Engine.Run makes of a container that printed stdout and
// stderr and ended with code (wall: killed at the wall-clock limit).
func Interpret(opt Options, stdout, stderr string, code int, wall, oom bool) (Outcome, error) {
	opt, err := opt.withDefaults()
	if err != nil {
		return Outcome{}, err
	}
	out := Outcome{Name: opt.Name, Limits: opt.Limits, StepTimeout: opt.StepTimeout, ExitCode: code,
		WallLimit: wall, OOMKilled: oom, requested: opt.Steps}
	out.interpret(opt, containerResult{code: code, wall: wall, oom: oom, stdout: stdout, stderr: stderr})
	return out, nil
}

// Made lists the ids of the containers the engine created.
func (e *Engine) Made() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.made...)
}

// Scrub is what Engine.Run does to an outcome before anyone sees it.
func Scrub(o *Outcome, hostPaths ...string) { o.scrub(hostPaths...) }

// CopyOut copies one built executable out, as Build does.
func CopyOut(src, dst string) (string, error) { return copyOut(src, dst) }

// WriteWarmModule writes the module a boundary's Warm builds.
func WriteWarmModule(ctx context.Context, module, dir string) error {
	return writeWarmModule(ctx, module, dir)
}

// InterpretCrash is what Engine.Crash makes of a container that printed
// stderr and ended with code (wall: killed at the wall-clock limit).
func InterpretCrash(co CrashOptions, stderr string, code int, wall bool) CrashOutcome {
	out := CrashOutcome{ExitCode: code, WallLimit: wall, Limits: Limits{Wall: DefaultCrashWall}}
	out.interpret(co, containerResult{code: code, wall: wall, stderr: stderr})
	return out
}

// PassOnly lets exactly the uids first … first+n-1 pass through dir.
func PassOnly(dir string, first, n int) error { return passOnly(dir, first, n) }
