-- Streamed model calls on PostgreSQL (issue 55), as SQLite's 0022_stream_chunks: one
-- small row per chunk of a streamed step, written in batches as they arrive; `seq` is
-- the chunk's offset in its stream across every attempt of the run. Times are
-- ISO-8601 UTC text, as SQLite's.
CREATE TABLE ll_stream_chunks (
    run     text NOT NULL,
    key     text NOT NULL,
    seq     bigint NOT NULL,
    attempt integer NOT NULL,
    kind    text NOT NULL CHECK (kind IN ('text', 'tool', 'state', 'reset', 'end')),
    data    text NOT NULL,
    mark    text,
    at      text NOT NULL,
    PRIMARY KEY (run, key, seq)
);
