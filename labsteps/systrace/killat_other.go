//go:build !(linux && amd64)

package systrace

func killAt(argv []string, opts KillOptions) (*Process, error) { return nil, ErrNoPtrace }
