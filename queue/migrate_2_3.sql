-- snacklab queue schema, version 2 -> 3.
-- The same tables; the three secondary indexes over every job (each written
-- at every state change) give way to two over the live jobs (schema.sql).
-- Runs in the opener's immediate transaction, after migrate_1_2.sql for a
-- version 1 file.
DROP INDEX IF EXISTS jobs_claim;
DROP INDEX IF EXISTS jobs_lease;
DROP INDEX IF EXISTS jobs_deadline;
CREATE INDEX IF NOT EXISTS jobs_live ON jobs (state, available_at, id, lease_until)
    WHERE state IN ('pending', 'leased');
CREATE INDEX IF NOT EXISTS jobs_pending_deadline ON jobs (deadline_at) WHERE state = 'pending';
PRAGMA application_id = 1936616305;
PRAGMA user_version = 3;
