-- The queue schema of version 2, kept unchanged so the tests can make version 1 and 2 files and migrate them.
-- snacklab queue schema, version 2 (PRAGMA user_version = 2), marked as a
-- snacklab queue by PRAGMA application_id 0x736e6b71 ("snkq"). Version 1 had
-- the same tables without the mark; migrate_1_2.sql adds it.
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

-- Serves the claim: the oldest due job first.
CREATE INDEX jobs_claim ON jobs (state, available_at, id);
CREATE INDEX jobs_lease ON jobs (state, lease_until) WHERE state = 'leased';
-- Serves the claim's sweep of jobs past their deadline (a pending job always
-- has available_at < deadline_at, so deadline_at <= now implies it is due).
CREATE INDEX jobs_deadline ON jobs (state, deadline_at);

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
PRAGMA user_version = 2;
