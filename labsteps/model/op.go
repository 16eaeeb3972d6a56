package model

import (
	"strconv"
	"strings"
)

// Op is one queuectl command of a sequence. Every field a verb takes is
// given explicitly (no defaults), so a sequence replays the same anywhere.
type Op struct {
	Verb        string
	ID          string
	Qty         int64
	MaxAttempts int64
	DeadlineMs  int64
	Owner       string
	LeaseMs     int64
	Token       int64
	Outcome     string
	Note        string
	Now         int64
}

// Args is the command line of op against the queue file db.
func (op Op) Args(db string) []string {
	a := []string{op.Verb, "--db", db}
	i := func(name string, v int64) { a = append(a, name, strconv.FormatInt(v, 10)) }
	s := func(name, v string) { a = append(a, name, v) }
	switch op.Verb {
	case "enqueue":
		s("--id", op.ID)
		i("--qty", op.Qty)
		i("--max-attempts", op.MaxAttempts)
		i("--deadline-ms", op.DeadlineMs)
	case "claim":
		s("--owner", op.Owner)
		i("--lease-ms", op.LeaseMs)
	case "finish":
		s("--id", op.ID)
		i("--token", op.Token)
		s("--outcome", op.Outcome)
	case "redrive":
		s("--id", op.ID)
		s("--note", op.Note)
	case "show":
		s("--id", op.ID)
	}
	i("--now-ms", op.Now)
	return append(a, "--json")
}

// Shell is op as a line a learner can paste (ids and notes are drawn from
// shell-safe characters, so no quoting is needed).
func (op Op) Shell(db string) string {
	return "queuectl " + strings.Join(op.Args(db), " ")
}
