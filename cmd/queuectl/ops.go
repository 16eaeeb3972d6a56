package main

import (
	"flag"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/term"

	"snacklab/internal/cliflag"
	"snacklab/internal/ops"
	"snacklab/queue"
)

// thresholdFlags defines --max-dead, --max-oldest-age and --max-ratio on fs
// (for alerts, and for serve's Attention box) and returns what reads them.
func thresholdFlags(fs *flag.FlagSet, act string) func() (ops.Thresholds, error) {
	maxDead := cliflag.NewInt(fs, "max-dead", 0, 0, cliflag.MaxExact, act+" when more than this many jobs are dead")
	maxAge := fs.Duration("max-oldest-age", 0, act+" when a dead job has been dead longer than this Go duration (90s, 2h), measured against --now-ms")
	var ratios stringsFlag
	fs.Var(&ratios, "max-ratio", "REASON=R: "+act+" when dead with REASON / all dead exceeds R (0..1); repeatable")
	return func() (ops.Thresholds, error) {
		th := ops.Thresholds{MaxRatio: map[queue.Reason]float64{}}
		if isSet(fs, "max-dead") {
			v := maxDead.Get()
			th.MaxDead = &v
		}
		if isSet(fs, "max-oldest-age") {
			th.MaxOldestAge = maxAge
		}
		for _, s := range ratios {
			reason, r, err := ops.ParseRatio(s)
			if err != nil {
				return th, err
			}
			th.MaxRatio[reason] = r
		}
		return th, nil
	}
}

// clockOf is the injected clock, held still, when --now-ms was given, and
// the wall clock otherwise: a long bulk redrive or a server must not stamp
// everything with the instant it started.
func clockOf(fs *flag.FlagSet, e *env) func() int64 {
	if isSet(fs, "now-ms") {
		now := e.now
		return func() int64 { return now }
	}
	return func() int64 { return time.Now().UnixMilli() }
}

// columns is the terminal's width for the progress bar: $COLUMNS when set
// (the user's word), else what the terminal says, else ops.DefaultColumns.
func columns(fd int) int {
	if n, err := strconv.Atoi(os.Getenv("COLUMNS")); err == nil && n > 0 {
		return n
	}
	if w, _, err := term.GetSize(fd); err == nil && w > 0 {
		return w
	}
	return ops.DefaultColumns
}

// stringsFlag collects a repeatable flag.
type stringsFlag []string

func (s *stringsFlag) String() string     { return strings.Join(*s, ",") }
func (s *stringsFlag) Set(v string) error { *s = append(*s, v); return nil }
