-- snacklab queue schema, version 3 -> 4: the jobs table is rebuilt WITHOUT
-- ROWID with the closed_at column, and its indexes name closed_at instead of
-- state (schema.sql). Runs in the opener's immediate transaction, with
-- foreign keys off until the rebuilt table is back under its name (SQLite's
-- documented way to change a table), after the table jobs_v4 was created from
-- schema.sql's definition, and after the earlier migrations for an older file.
INSERT INTO jobs_v4 (id, qty, state, reason, attempts, max_attempts, token, owner, lease_until,
        available_at, deadline_at, deadline_window_ms, created_at, updated_at, closed_at)
    SELECT id, qty, state, reason, attempts, max_attempts, token, owner, lease_until,
        available_at, deadline_at, deadline_window_ms, created_at, updated_at,
        CASE WHEN state IN ('done', 'dead') THEN updated_at END
    FROM jobs;
DROP TABLE jobs;
ALTER TABLE jobs_v4 RENAME TO jobs;
PRAGMA application_id = 1936616305;
PRAGMA user_version = 4;
