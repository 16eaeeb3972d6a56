//go:build !(linux && amd64)

package powercut

func start(argv []string, opts Options, initial map[string][]byte) (*Process, error) {
	return nil, ErrNoPtrace
}
