-- Receiver schema, version 1. Applied once, in one transaction, to an empty file.
-- The CHECKs repeat the contract's value rules so that a bug in the Go code
-- cannot store an order the contract forbids.

CREATE TABLE orders (
    id    TEXT    NOT NULL PRIMARY KEY
          CHECK (length(id) BETWEEN 1 AND 64
                 AND substr(id, 1, 1) GLOB '[A-Za-z0-9]'
                 AND id NOT GLOB '*[^A-Za-z0-9._:-]*'),
    qty   INTEGER NOT NULL CHECK (qty BETWEEN 1 AND 1000000),
    token INTEGER NOT NULL CHECK (token >= 0),
    at_ms INTEGER NOT NULL CHECK (at_ms >= 0)
) STRICT;

-- One row: the running total of every applied order's qty.
CREATE TABLE stock (
    one INTEGER NOT NULL PRIMARY KEY CHECK (one = 1),
    qty INTEGER NOT NULL CHECK (qty >= 0)
) STRICT;

INSERT INTO stock (one, qty) VALUES (1, 0);

-- How many POST /orders carried each id, whatever the answer.
CREATE TABLE requests (
    id TEXT    NOT NULL PRIMARY KEY
       CHECK (length(id) BETWEEN 1 AND 64
              AND substr(id, 1, 1) GLOB '[A-Za-z0-9]'
              AND id NOT GLOB '*[^A-Za-z0-9._:-]*'),
    n  INTEGER NOT NULL CHECK (n >= 1)
) STRICT;
