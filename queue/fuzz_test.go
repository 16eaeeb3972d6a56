package queue_test

import (
	"errors"
	"testing"

	"snacklab/queue"
)

// FuzzCheckNote: whatever the input, an accepted note is a short ASCII
// identifier, so nothing but a ticket id can reach the audit record.
func FuzzCheckNote(f *testing.F) {
	for _, s := range []string{"T-1", "INC-42/fix", "a", "", " ", "T 1", "é", "T-1\n", "\x00",
		"customer Jane Doe", "#1", "JIRA:OPS-9#c3", string(make([]byte, 65))} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, note string) {
		err := queue.CheckNote(note)
		if err != nil {
			if !errors.Is(err, queue.ErrInvalid) {
				t.Fatalf("CheckNote(%q) = %v, want ErrInvalid", note, err)
			}
			return
		}
		if len(note) < 1 || len(note) > 64 {
			t.Fatalf("accepted a note of %d bytes", len(note))
		}
		for i := 0; i < len(note); i++ {
			c := note[i]
			ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || (i > 0 && (c == '.' || c == '_' || c == ':' || c == '/' || c == '#' || c == '-'))
			if !ok {
				t.Fatalf("accepted %q with byte %q at %d", note, c, i)
			}
		}
	})
}

// FuzzCheckID: the same for order ids and owners, which appear in alerts.
func FuzzCheckID(f *testing.F) {
	for _, s := range []string{"o-1", "snack:42", "", "-x", "a b", "ü", string(make([]byte, 65))} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		if queue.CheckID("id", id) != nil {
			return
		}
		if len(id) < 1 || len(id) > 64 {
			t.Fatalf("accepted an id of %d bytes", len(id))
		}
		for i := 0; i < len(id); i++ {
			c := id[i]
			ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || (i > 0 && (c == '.' || c == '_' || c == ':' || c == '-'))
			if !ok {
				t.Fatalf("accepted %q with byte %q at %d", id, c, i)
			}
		}
	})
}
