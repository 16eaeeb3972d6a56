package harness

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"sync"
)

// Bounds on what the judge keeps of a judged program's output. A program
// that floods stdout, prints a 6 MiB line or writes without end must cost
// the judge a stated amount of memory, not all of it: past a bound the
// rest is read and dropped (the program never blocks on a full pipe, so its
// exit is still observed) and what is kept says where it was cut.
const (
	MaxStdout   = 8 << 20 // a program's stdout, all lines together
	MaxLine     = 1 << 20 // one line of it
	MaxStderr   = 1 << 20 // a program's stderr
	MaxObserved = 4000    // the excerpt of a program's output in a check's observed text
	MaxNarrate  = 4000    // one line of a program as the narrative quotes it

	MaxCheckText = 16 << 10 // a check's observed text, one narrative entry: a backstop
	MaxNarrative = 4 << 20  // the step's whole narrative
)

// cutMark is what replaces the dropped part of a bounded text.
func cutMark(n int) string { return fmt.Sprintf(" … (cut at %d bytes)", n) }

// capBuffer is an io.Writer that keeps the first max bytes written to it
// and counts the rest. Write never fails, so a process writing into it is
// drained to its end. Safe for concurrent use.
type capBuffer struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	max     int
	dropped int64
}

func newCapBuffer(max int) *capBuffer { return &capBuffer{max: max} }

func (c *capBuffer) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	keep := min(len(p), c.max-c.buf.Len())
	c.buf.Write(p[:keep])
	c.dropped += int64(len(p) - keep)
	return len(p), nil
}

// Bytes is what was kept, with the cut mark on its own line when some was
// dropped.
func (c *capBuffer) Bytes() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	b := bytes.Clone(c.buf.Bytes())
	if c.dropped > 0 {
		b = append(b, cutMark(c.max)+"\n"...)
	}
	return b
}

func (c *capBuffer) String() string { return string(c.Bytes()) }

// Cut reports whether anything was dropped.
func (c *capBuffer) Cut() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.dropped > 0
}

// lineReader reads a program's stdout line by line with both bounds: a
// line past maxLine keeps its first maxLine bytes and the cut mark (the
// rest of it is read and dropped), and once maxTotal bytes of lines were
// returned, the rest of the stream is dropped.
type lineReader struct {
	r                  *bufio.Reader
	maxLine, maxTotal  int
	total              int
	cutLine, cutStream bool // a line was cut; the stream was
}

func newLineReader(r io.Reader, maxLine, maxTotal int) *lineReader {
	return &lineReader{r: bufio.NewReaderSize(r, 64<<10), maxLine: maxLine, maxTotal: maxTotal}
}

// next returns the next line without its newline; ok is false at the end
// of the stream or once the total bound is reached (then the rest is
// discarded before it returns).
func (l *lineReader) next() (line string, ok bool) {
	if l.total >= l.maxTotal {
		if !l.cutStream {
			if n, _ := io.Copy(io.Discard, l.r); n > 0 {
				l.cutStream = true
			}
		}
		return "", false
	}
	var b []byte
	cut := false
	for {
		frag, err := l.r.ReadSlice('\n')
		if room := l.maxLine - len(b); len(frag) > room {
			b, cut = append(b, frag[:room]...), true
		} else {
			b = append(b, frag...)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if len(b) == 0 && err != nil {
			return "", false
		}
		break
	}
	b = bytes.TrimSuffix(b, []byte("\n"))
	line = string(bytes.TrimSuffix(b, []byte("\r")))
	if cut {
		l.cutLine = true
		line += cutMark(l.maxLine)
	}
	l.total += len(line) + lineCost
	return line, true
}

// lineCost is what a kept line costs beyond its text (a Line, its slice
// slot, its entry in the story): counted against the total, so a flood of
// empty lines is bounded in memory too, not only in bytes of text.
const lineCost = 64

// bound cuts s to at most max bytes (on a rune boundary), marking the cut.
func bound(s string, max int) string {
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && cut < len(s) && s[cut]&0xc0 == 0x80 {
		cut--
	}
	return s[:cut] + cutMark(max)
}
