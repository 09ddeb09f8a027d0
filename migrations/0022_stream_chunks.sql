-- letitloop schema, version 22: streamed model calls (issue 55).
--
-- A streamed step (`letitloop.streams`) journals its chunks here as they arrive, in
-- batches, one small row per chunk: the answer is never rewritten as it grows. `seq`
-- is the chunk's offset in its stream (0, 1, 2, ... across every attempt of the run),
-- so a reader resumes from any offset and sees each chunk once. A kill mid-stream
-- leaves the prefix here; the next attempt re-attaches, continues from it, or
-- restarts the call after a `reset` chunk. An `end` chunk closes the stream.
CREATE TABLE stream_chunks (
    run     TEXT NOT NULL,         -- runs.id
    key     TEXT NOT NULL,         -- the streamed step's key
    seq     INTEGER NOT NULL,      -- the chunk's offset in its stream, from 0
    attempt INTEGER NOT NULL,      -- the attempt that received it
    kind    TEXT NOT NULL CHECK (kind IN ('text', 'tool', 'state', 'reset', 'end')),
    data    TEXT NOT NULL,         -- text: the text; tool: a tool call's delta (JSON); state,
                                   -- reset, end: JSON (the provider's handle, why, the usage)
    mark    TEXT,                  -- the provider's position after it (Responses' sequence_number)
    at      TEXT NOT NULL,         -- ISO-8601 UTC, when it was received
    PRIMARY KEY (run, key, seq)
) WITHOUT ROWID;
