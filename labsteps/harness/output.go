package harness

import (
	"io"
	"os"
	"os/exec"
	"sync"
	"time"
)

// output collects a process's stdout and stderr through pipes of the
// harness's own. The process writes into the pipes directly (no copying
// goroutine of os/exec), so reading them to their end is part of the
// process's end: the harness waits for both ends of file, with a bound, and
// knows when it did not get them. os/exec's WaitDelay would instead close the
// pipes after a fixed delay and hand back whatever had been copied so far:
// under load, a process's whole stdout could be lost without a word.
type output struct {
	rOut, rErr, wOut, wErr *os.File
	stdout, stderr         *capBuffer    // MaxStdout, MaxStderr
	done                   chan struct{} // closed when both readers have stopped
}

// collect gives cmd its stdout and stderr pipes. Call started after
// cmd.Start (whatever it returned).
func collect(cmd *exec.Cmd) (*output, error) {
	o := &output{done: make(chan struct{}), stdout: newCapBuffer(MaxStdout), stderr: newCapBuffer(MaxStderr)}
	var err error
	if o.rOut, o.wOut, err = os.Pipe(); err != nil {
		return nil, err
	}
	if o.rErr, o.wErr, err = os.Pipe(); err != nil {
		o.rOut.Close()
		o.wOut.Close()
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = o.wOut, o.wErr
	return o, nil
}

// started closes the harness's copies of the write ends (the process has
// its own now, or never started) and starts reading.
func (o *output) started() {
	o.wOut.Close()
	o.wErr.Close()
	var wg sync.WaitGroup
	for _, p := range []struct {
		r *os.File
		b *capBuffer
	}{{o.rOut, o.stdout}, {o.rErr, o.stderr}} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			io.Copy(p.b, p.r)
		}()
	}
	go func() {
		wg.Wait()
		close(o.done)
	}()
}

// drain waits at most limit for both ends of file. It reports whether they
// came: if not, something still holds the pipes open (a process the program
// left behind), the readers are stopped, and what was read is incomplete.
// Either way the buffers are safe to read afterwards.
func (o *output) drain(limit time.Duration) bool {
	t := time.NewTimer(limit)
	defer t.Stop()
	ok := true
	select {
	case <-o.done:
	case <-t.C:
		ok = false
	}
	o.rOut.Close() // unblocks a reader still waiting
	o.rErr.Close()
	<-o.done
	return ok
}
