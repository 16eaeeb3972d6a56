-- snacklab queue schema, version 1 -> 2.
-- Version 2 has the same tables as version 1; it marks the file as a
-- snacklab queue (application_id "snkq" = 0x736e6b71) so that another
-- application's SQLite file is refused instead of being read as a queue.
PRAGMA application_id = 1936616305;
PRAGMA user_version = 2;
