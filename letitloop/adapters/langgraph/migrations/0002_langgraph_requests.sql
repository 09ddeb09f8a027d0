-- The LangGraph saver's request log: migration set "letitloop.langgraph", number 2.
--
-- One row per top-level invocation of a graph on a thread (invoke, ainvoke,
-- stream, astream with an input), so that the same request asked again is
-- answered from the thread's checkpoints instead of running the graph again
-- (letitloop/adapters/langgraph/requests.py says which request is which).
-- Text everywhere a reader looks: ids, fingerprints, ISO-8601 UTC times.

CREATE TABLE IF NOT EXISTS langgraph_requests (
    thread_id       TEXT NOT NULL,
    seq             INTEGER NOT NULL,    -- the thread's requests in the order they started
    input_fp        TEXT NOT NULL,       -- fingerprint of the input as given (a Command's too)
    input_kind      TEXT NOT NULL,       -- 'input' | 'command'
    from_checkpoint TEXT,                -- the thread's newest root checkpoint when it started (NULL: none)
    to_checkpoint   TEXT,                -- the newest root checkpoint when it finished (NULL: not finished)
    status          TEXT NOT NULL,       -- 'running' | 'done' | 'failed'
    process         TEXT NOT NULL,       -- host:pid:token of the process that made it
    started         TEXT NOT NULL,
    finished        TEXT,
    PRIMARY KEY (thread_id, seq)
);
