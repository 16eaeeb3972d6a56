-- snacklab queue schema, version 4 -> 5: runs in the opener's immediate
-- transaction right after schema.sql's "-- Version 5" part, which creates
-- the attempts and tallies tables, their triggers and the jobs_dead index,
-- and marks the file version 5. The done tally starts from the jobs already
-- done; the triggers keep it from here on. Attempts before version 5 left
-- no evidence, so none is invented.
UPDATE tallies SET n = (SELECT count(*) FROM jobs WHERE state = 'done') WHERE name = 'done';
