// Package hostile holds, in its test, the table of hostile inputs that
// snacklab's three programs must refuse loudly: malformed and out-of-range
// numbers, foreign, damaged and wrongly configured files, paths that are not
// files. Each row runs a built binary and checks the exit code of
// CONTRACT.md §6, one stderr line naming the problem, no panic, and that no
// file in the work directory changed or appeared (issue 11).
package hostile
