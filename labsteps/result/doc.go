// Package result holds what a lab run found — a step's Result, its Checks
// and the Events of its timeline — and the one JSON form of results that
// every runner emits and every reader parses.
//
// It is a leaf (the standard library only), so that the report writers,
// the graders and a judge that carries no solution can all read results
// without importing the harness that made them.
package result
