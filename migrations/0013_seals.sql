-- letitloop schema, version 13: the sealed chain.
--
-- With a seal key (LETITLOOP_SEAL_KEY, or Journal(..., seal=key); the key is
-- never stored in the file), every row of a run that reaches a final state (a
-- step done or failed, a marker done or failed, a sleep or a wait done) adds
-- one entry here, in the same transaction as the row: the entry's position in
-- the run's chain, the row's key, kind and status, a SHA-256 of the row's
-- content and an HMAC-SHA256 of all that and the previous entry's seal
-- (letitloop/seals.py). `lil verify` walks each run's chain and compares its
-- rows with their latest entries (docs/audit.md). The chain is append-only: a
-- row that is written again (a failed step that runs once more) adds a new
-- entry, and its earlier entry stays, so every link can still be checked.

CREATE TABLE seals (
    run    INTEGER NOT NULL,   -- runs.num of the run
    n      INTEGER NOT NULL,   -- the entry's position in the run's chain: 1, 2, 3, ...
    key    TEXT NOT NULL,      -- the row's key
    kind   TEXT NOT NULL,      -- step, marker, sleep, wait
    status TEXT NOT NULL,      -- the row's status when it was sealed
    digest TEXT NOT NULL,      -- hex SHA-256 of the row's content (seals.row_digest)
    seal   TEXT NOT NULL,      -- hex HMAC-SHA256 of this entry and the previous one's seal
    PRIMARY KEY (run, n)
);
