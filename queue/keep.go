package queue

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
)

// The objects on jobs that the schema itself defines, in any version; any
// other index or trigger on jobs is the user's, and a rebuild keeps it.
var ownObjects = []string{
	"jobs_claim", "jobs_lease", "jobs_deadline", // versions 1, 2
	"jobs_live", "jobs_pending_deadline", // version 3
	"jobs_open", "jobs_due", "jobs_last_lease", "jobs_closed_update", "jobs_closed_insert", // version 4
	"jobs_dead", "attempts_expired", "tallies_done_update", "tallies_done_insert", "tallies_done_delete", // version 5
}

// version5Names are the objects the version 5 part creates: a file that
// already has one under that name (a user's) cannot take it.
var version5Names = []string{"attempts", "tallies", "attempts_expired", "tallies_done_update",
	"tallies_done_insert", "tallies_done_delete", "jobs_dead"}

// userObjects is what a rebuild of jobs must carry over: the user's indexes
// and triggers on it (their SQL, re-run after the rebuild) and its extra
// columns (added to the new table and copied). Views need nothing: with
// legacy_alter_table on, the rename leaves them naming jobs, as before.
type userObjects struct {
	objects []struct{ kind, name, sql string }
	columns []extraColumn
}

type extraColumn struct {
	name, def string // def is what ALTER TABLE ADD COLUMN takes
}

// findUserObjects reads them, and refuses (naming it) an extra column the
// rebuilt STRICT table cannot take as it is: a generated column, a type
// STRICT does not allow, or NOT NULL without a default.
func findUserObjects(ctx context.Context, tx *sql.Tx) (userObjects, error) {
	var u userObjects
	rows, err := tx.QueryContext(ctx, `SELECT type, name, sql FROM sqlite_schema
		WHERE tbl_name = 'jobs' AND type IN ('index', 'trigger') AND sql IS NOT NULL ORDER BY type, name`)
	if err != nil {
		return u, classify(err)
	}
	for rows.Next() {
		var o struct{ kind, name, sql string }
		if err := rows.Scan(&o.kind, &o.name, &o.sql); err != nil {
			rows.Close()
			return u, classify(err)
		}
		if !slices.Contains(ownObjects, o.name) {
			u.objects = append(u.objects, o)
		}
	}
	rows.Close()
	rows, err = tx.QueryContext(ctx, `SELECT name, upper(type), "notnull", dflt_value, hidden FROM pragma_table_xinfo('jobs')`)
	if err != nil {
		return u, classify(err)
	}
	defer rows.Close()
	known := append(slices.Clone(tableColumns["jobs"]), "closed_at")
	var refused []string
	for rows.Next() {
		var name, typ string
		var notNull bool
		var dflt sql.NullString
		var hidden int
		if err := rows.Scan(&name, &typ, &notNull, &dflt, &hidden); err != nil {
			return u, classify(err)
		}
		if slices.Contains(known, name) {
			continue
		}
		if typ == "" {
			typ = "ANY"
		}
		switch {
		case hidden != 0:
			refused = append(refused, name+" (generated)")
			continue
		case !slices.Contains([]string{"INT", "INTEGER", "REAL", "TEXT", "BLOB", "ANY"}, typ):
			refused = append(refused, fmt.Sprintf("%s (type %s: the queue's STRICT table takes INT, INTEGER, REAL, TEXT, BLOB or ANY)", name, typ))
			continue
		case notNull && !dflt.Valid:
			refused = append(refused, name+" (NOT NULL without a default)")
			continue
		}
		def := quoteIdent(name) + " " + typ
		if notNull {
			def += " NOT NULL"
		}
		if dflt.Valid {
			def += " DEFAULT " + dflt.String
		}
		u.columns = append(u.columns, extraColumn{name: name, def: def})
	}
	if len(refused) > 0 {
		return u, fmt.Errorf("%w: the jobs table's own columns %s cannot be kept by the rebuild to version %d; "+
			"nothing was changed: change or drop them, then open the file again", ErrNotQueue, strings.Join(refused, ", "), SchemaVersion)
	}
	return u, rows.Err()
}

// rebuildSteps are the version 3 to 4 rebuild's statements carrying u's
// extra columns: added to jobs_v4 after it is created and copied with the
// rest.
func (u userObjects) rebuildSteps() []string {
	create := strings.Replace(jobsTable, "CREATE TABLE jobs (", "CREATE TABLE jobs_v4 (", 1)
	steps := []string{create}
	copyRows := migrate34SQL
	if len(u.columns) > 0 {
		var names []string
		for _, c := range u.columns {
			steps = append(steps, "ALTER TABLE jobs_v4 ADD COLUMN "+c.def)
			names = append(names, quoteIdent(c.name))
		}
		list := strings.Join(names, ", ")
		copyRows = strings.Replace(copyRows, "created_at, updated_at, closed_at)", "created_at, updated_at, closed_at, "+list+")", 1)
		copyRows = strings.Replace(copyRows, "CASE WHEN state IN ('done', 'dead') THEN updated_at END", "CASE WHEN state IN ('done', 'dead') THEN updated_at END, "+list, 1)
	}
	return append(steps, copyRows, jobsIndexes)
}

// restore re-creates the user's indexes and triggers on the rebuilt table,
// refusing (naming it) one that no longer fits.
func (u userObjects) restore(ctx context.Context, tx *sql.Tx) error {
	for _, o := range u.objects {
		if _, err := tx.ExecContext(ctx, o.sql); err != nil {
			return fmt.Errorf("%w: cannot keep the %s %s on jobs through the rebuild to version %d (%v); nothing was changed: drop it, then open the file again",
				ErrNotQueue, o.kind, o.name, SchemaVersion, classify(err))
		}
	}
	return nil
}

// checkVersion5Names refuses a file where a name the version 5 part needs
// is already taken by something of the user's, naming it.
func checkVersion5Names(ctx context.Context, tx *sql.Tx) error {
	rows, err := tx.QueryContext(ctx, `SELECT type || ' ' || name FROM sqlite_schema WHERE name IN (`+
		strings.TrimSuffix(strings.Repeat("?, ", len(version5Names)), ", ")+`) ORDER BY name`, anySlice(version5Names)...)
	if err != nil {
		return classify(err)
	}
	defer rows.Close()
	var taken []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return classify(err)
		}
		taken = append(taken, s)
	}
	if len(taken) > 0 {
		return fmt.Errorf("%w: the file already has %s, a name schema version %d needs; nothing was changed: rename it, then open the file again",
			ErrNotQueue, strings.Join(taken, ", "), SchemaVersion)
	}
	return rows.Err()
}

func quoteIdent(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }

func anySlice(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}
