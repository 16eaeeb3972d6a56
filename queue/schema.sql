-- snacklab queue schema, version 5 (PRAGMA user_version = 5), marked as a
-- snacklab queue by PRAGMA application_id 0x736e6b71 ("snkq"). Version 1 had
-- the same tables without the mark (migrate_1_2.sql adds it); versions 1 and
-- 2 had three secondary indexes over every job (migrate_2_3.sql); version 3
-- had a rowid table without closed_at and two indexes whose terms named
-- state (migrate_3_4.sql rebuilds the table); version 4 had no attempts,
-- no tallies and no jobs_dead (the version 5 part at the end is what
-- migrate_4_5.sql adds).
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
    -- The now at which the job became done or dead (its updated_at then);
    -- NULL while pending or leased. It repeats what state says so that the
    -- indexes over live jobs can name it instead of state: SQLite rewrites
    -- every index whose terms name a column an UPDATE sets, and a claim sets
    -- state but not closed_at (docs/performance.md). The reference sets it
    -- with state; a statement that does not (a learner's) has it set by the
    -- trigger jobs_closed, so it need not know the column exists.
    closed_at          INTEGER,
    -- owner and lease exist exactly while leased; a reason exactly while dead.
    CHECK ((state = 'leased') = (owner IS NOT NULL AND lease_until IS NOT NULL)),
    CHECK (state = 'leased' OR (owner IS NULL AND lease_until IS NULL)),
    CHECK ((state = 'dead') = (reason IS NOT NULL)),
    -- a leased job has been granted at least once.
    CHECK (state <> 'leased' OR (token >= 1 AND attempts >= 1))
) STRICT, WITHOUT ROWID;

-- The table is keyed by id alone (WITHOUT ROWID: no second b-tree for the
-- key). Secondary indexes hold only the live jobs (closed_at IS NULL): done
-- and dead jobs, most of an old file, are in no index but the key, so they
-- cost a claim nothing however many there are. Every page a commit writes is
-- written twice in a rollback journal, so each index must earn its place,
-- and a claim (state, owner, lease_until, attempts, token, updated_at) moves
-- none of them unless it grants a job its last attempt.
--
-- The claim's order: live jobs by (available_at, id); a claim skips the
-- leases still running, which are few (one per worker).
CREATE INDEX jobs_open ON jobs (available_at, id) WHERE closed_at IS NULL;
-- The sweep's look for jobs at their deadline: a seek, however many pending
-- jobs are due (scanning them cost a millisecond per claim with 1000 due).
CREATE INDEX jobs_due ON jobs (deadline_at) WHERE closed_at IS NULL;
-- The sweep's look for spent last attempts: only leased jobs on their last
-- grant are in it (a pending job always has attempts < max_attempts).
CREATE INDEX jobs_last_lease ON jobs (lease_until)
    WHERE closed_at IS NULL AND attempts >= max_attempts;

-- Puts closed_at right after any insert or update that left it disagreeing
-- with state, and only then: the reference's own statements never fire it.
CREATE TRIGGER jobs_closed_update AFTER UPDATE OF state, closed_at ON jobs
    WHEN (NEW.closed_at IS NULL) <> (NEW.state IN ('pending', 'leased'))
BEGIN
    UPDATE jobs SET closed_at = CASE WHEN NEW.state IN ('done', 'dead') THEN NEW.updated_at END
    WHERE id = NEW.id;
END;
CREATE TRIGGER jobs_closed_insert AFTER INSERT ON jobs
    WHEN (NEW.closed_at IS NULL) <> (NEW.state IN ('pending', 'leased'))
BEGIN
    UPDATE jobs SET closed_at = CASE WHEN NEW.state IN ('done', 'dead') THEN NEW.updated_at END
    WHERE id = NEW.id;
END;

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

-- Version 5: the evidence of every attempt, and what lets the operator's
-- views count without reading every job (docs/operations.md).

-- One row per attempt that ended: written by finish in its own transaction
-- (ok, retry, permanent), by the sender for an answer it could not decide
-- (undecided: a BadAck or a 3xx, the job staying leased), and by the queue
-- when a lease ran out unfinished (expired). Bounded and non-personal: an
-- HTTP status and an error class from a closed set, never a body or text.
-- Keyed by the grant's token, which a redrive keeps counting.
CREATE TABLE attempts (
    job_id  TEXT    NOT NULL REFERENCES jobs (id),
    token   INTEGER NOT NULL CHECK (token >= 1),
    attempt INTEGER NOT NULL CHECK (attempt >= 1),
    outcome TEXT    NOT NULL
            CHECK (outcome IN ('ok', 'retry', 'permanent', 'undecided', 'expired')),
    status  INTEGER CHECK (status BETWEEN 100 AND 599),
    error   TEXT    CHECK (error IN ('timeout', 'refused', 'reset', 'closed', 'transport',
                                     'http', '3xx', 'badack', 'lease')),
    at_ms   INTEGER NOT NULL,
    PRIMARY KEY (job_id, token)
) STRICT, WITHOUT ROWID;

-- A lease re-granted after it ran out (the token moves while leased) ended
-- unfinished; its holder may have written an undecided row, which stays.
CREATE TRIGGER attempts_expired AFTER UPDATE OF token ON jobs
    WHEN OLD.state = 'leased' AND NEW.token <> OLD.token
BEGIN
    INSERT OR IGNORE INTO attempts (job_id, token, attempt, outcome, error, at_ms)
    VALUES (OLD.id, OLD.token, OLD.attempts, 'expired', 'lease', NEW.updated_at);
END;

-- Done jobs, most of an old file, are counted here by triggers in the
-- writing transaction, whoever's statement it is, so stats need not read
-- them; live jobs are counted in the live indexes, dead ones in jobs_dead.
CREATE TABLE tallies (
    name TEXT    PRIMARY KEY CHECK (name IN ('done')),
    n    INTEGER NOT NULL
) STRICT, WITHOUT ROWID;
INSERT INTO tallies (name, n) VALUES ('done', 0);
CREATE TRIGGER tallies_done_update AFTER UPDATE OF state ON jobs
    WHEN (OLD.state = 'done') <> (NEW.state = 'done')
BEGIN
    UPDATE tallies SET n = n + (NEW.state = 'done') - (OLD.state = 'done') WHERE name = 'done';
END;
CREATE TRIGGER tallies_done_insert AFTER INSERT ON jobs WHEN NEW.state = 'done'
BEGIN
    UPDATE tallies SET n = n + 1 WHERE name = 'done';
END;
CREATE TRIGGER tallies_done_delete AFTER DELETE ON jobs WHEN OLD.state = 'done'
BEGIN
    UPDATE tallies SET n = n - 1 WHERE name = 'done';
END;

-- The dead jobs by reason, oldest first: stats, dead, alerts and the
-- dashboard read only these. It names reason, which no claim sets, so a
-- claim never moves it (reason is set exactly while dead).
CREATE INDEX jobs_dead ON jobs (reason, closed_at, id) WHERE reason IS NOT NULL;

PRAGMA application_id = 1936616305;
PRAGMA user_version = 5;
