// Package exitcode maps errors to the exit codes of CONTRACT.md §6, so every
// snacklab program answers the same failure with the same number.
package exitcode

import (
	"errors"
	"fmt"

	"snacklab/internal/cliflag"
	"snacklab/queue"
)

// Codes from CONTRACT.md §6.
const (
	OK          = 0
	Internal    = 1
	Usage       = 2
	Invalid     = 3
	Missing     = 4
	NotQueue    = 5
	Busy        = 6
	Conflict    = 7
	NotFound    = 8
	RedrivePend = 9
	RedriveLsd  = 10
	RedriveDone = 11
	NotApplied  = 12
	Empty       = 13
	BadAck      = 20
	Delivery    = 21
	Alert       = 22
)

// ErrUsage marks a command line that cannot be understood.
var ErrUsage = errors.New("usage")

// Usagef is a usage error with a message; the message should end with a "Try:" hint.
func Usagef(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrUsage, fmt.Sprintf(format, args...))
}

// Error carries an explicit exit code for outcomes that are not failures of
// the program, such as "nothing claimable" or "finish not applied".
type Error struct {
	Code int
	Err  error
}

func (e *Error) Error() string { return e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// With wraps err so that Code reports code for it.
func With(code int, err error) error { return &Error{Code: code, Err: err} }

// Code is the exit code for err: 0 for nil, the explicit code of an *Error,
// else the code of the first sentinel err wraps, else Internal.
func Code(err error) int {
	if err == nil {
		return OK
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	for _, m := range []struct {
		err  error
		code int
	}{
		{ErrUsage, Usage},
		{queue.ErrInvalid, Invalid},
		{cliflag.ErrRange, Invalid},
		{queue.ErrMissing, Missing},
		{queue.ErrNotQueue, NotQueue},
		{queue.ErrBusy, Busy},
		{queue.ErrConflict, Conflict},
		{queue.ErrNotFound, NotFound},
		{queue.ErrRedrivePending, RedrivePend},
		{queue.ErrRedriveLeased, RedriveLsd},
		{queue.ErrRedriveDone, RedriveDone},
	} {
		if errors.Is(err, m.err) {
			return m.code
		}
	}
	return Internal
}
