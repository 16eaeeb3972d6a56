package harness

import "io"

// StraceUser is straceUser with the account files lookup reads.
func StraceUser(j *Judged, prog string, lookup func(uid string) (Account, error)) string {
	old := lookupAccount
	lookupAccount = lookup
	defer func() { lookupAccount = old }()
	return j.straceUser(prog)
}

// ReadLines reads r as a Proc's stdout is read, with the given bounds: the
// lines kept, whether a line was cut and whether the stream was.
func ReadLines(r io.Reader, maxLine, maxTotal int) (lines []string, cutLine, cutStream bool) {
	lr := newLineReader(r, maxLine, maxTotal)
	for {
		l, ok := lr.next()
		if !ok {
			return lines, lr.cutLine, lr.cutStream
		}
		lines = append(lines, l)
	}
}

// CapWrite writes each of writes into a buffer keeping max bytes and
// returns what it kept.
func CapWrite(max int, writes ...string) (string, bool) {
	c := newCapBuffer(max)
	for _, w := range writes {
		if n, err := c.Write([]byte(w)); n != len(w) || err != nil {
			panic("capBuffer.Write refused bytes")
		}
	}
	return c.String(), c.Cut()
}

// Bound is bound.
func Bound(s string, max int) string { return bound(s, max) }
