-- snacklab queue schema, version 3 (PRAGMA user_version = 3), marked as a
-- snacklab queue by PRAGMA application_id 0x736e6b71 ("snkq"). Version 1 had
-- the same tables without the mark (migrate_1_2.sql adds it); versions 1 and
-- 2 had three secondary indexes over every job where version 3 has two over
-- the live jobs (migrate_2_3.sql).
-- The CHECK constraints restate the rules of CONTRACT.md so that no program,
-- not even a wrong one, can store a job the contract says cannot exist.

CREATE TABLE jobs (
    id                 TEXT    PRIMARY KEY
                       CHECK (length(id) BETWEEN 1 AND 64 AND id NOT GLOB '*[^A-Za-z0-9._:-]*'),
    qty                INTEGER NOT NULL CHECK (qty BETWEEN 1 AND 1000000),
    state              TEXT    NOT NULL DEFAULT 'pending'
                       CHECK (state IN ('pending', 'leased', 'done', 'dead')),
    reason             TEXT    CHECK (reason IN ('permanent', 'exhausted', 'deadline')),
    attempts           INTEGER NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    max_attempts       INTEGER NOT NULL CHECK (max_attempts BETWEEN 1 AND 1000),
    token              INTEGER NOT NULL DEFAULT 0 CHECK (token >= 0),
    owner              TEXT,
    lease_until        INTEGER,
    available_at       INTEGER NOT NULL,
    deadline_at        INTEGER NOT NULL,
    deadline_window_ms INTEGER NOT NULL CHECK (deadline_window_ms >= 1),
    created_at         INTEGER NOT NULL,
    updated_at         INTEGER NOT NULL,
    -- owner and lease exist exactly while leased; a reason exactly while dead.
    CHECK ((state = 'leased') = (owner IS NOT NULL AND lease_until IS NOT NULL)),
    CHECK (state = 'leased' OR (owner IS NULL AND lease_until IS NULL)),
    CHECK ((state = 'dead') = (reason IS NOT NULL)),
    -- a leased job has been granted at least once.
    CHECK (state <> 'leased' OR (token >= 1 AND attempts >= 1))
) STRICT;

-- Secondary indexes only over the live jobs: done and dead jobs, most of an
-- old file, are in no index but the primary key, so they cost a claim
-- nothing however many there are. jobs_live serves the claim (pending jobs in
-- (available_at, id) order; leased ones with their lease_until). A job's
-- entries move only when its state changes; every page a commit writes is
-- written twice in a rollback journal, so an index must earn its place
-- (docs/performance.md).
CREATE INDEX jobs_live ON jobs (state, available_at, id, lease_until)
    WHERE state IN ('pending', 'leased');
-- Serves the claim's look for pending jobs at their deadline, in O(log n)
-- however many pending jobs are due (scanning jobs_live for them cost a
-- millisecond per claim with 1000 due jobs; measured in docs/performance.md).
CREATE INDEX jobs_pending_deadline ON jobs (deadline_at) WHERE state = 'pending';

-- One row per redrive, written in the same transaction as the job's change.
CREATE TABLE redrives (
    seq         INTEGER PRIMARY KEY,
    job_id      TEXT    NOT NULL REFERENCES jobs (id),
    prev_token  INTEGER NOT NULL CHECK (prev_token >= 0),
    prev_reason TEXT    NOT NULL CHECK (prev_reason IN ('permanent', 'exhausted', 'deadline')),
    at_ms       INTEGER NOT NULL,
    note        TEXT    NOT NULL
                CHECK (length(note) BETWEEN 1 AND 64 AND note NOT GLOB '*[^A-Za-z0-9._:/#-]*')
) STRICT;
CREATE INDEX redrives_job ON redrives (job_id, seq);

-- One row each time a person looked at a job; never changes the job.
CREATE TABLE investigations (
    seq    INTEGER PRIMARY KEY,
    job_id TEXT    NOT NULL REFERENCES jobs (id),
    at_ms  INTEGER NOT NULL,
    note   TEXT    NOT NULL
           CHECK (length(note) BETWEEN 1 AND 64 AND note NOT GLOB '*[^A-Za-z0-9._:/#-]*')
) STRICT;
CREATE INDEX investigations_job ON investigations (job_id, seq);

PRAGMA application_id = 1936616305;
PRAGMA user_version = 3;
