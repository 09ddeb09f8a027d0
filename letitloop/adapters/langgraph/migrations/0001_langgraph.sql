-- The LangGraph saver's tables: migration set "letitloop.langgraph", number 1.
--
-- Applied by letitloop.adapters.langgraph.LetItLoopCheckpointSaver when it
-- first opens a journal file (recorded in _sqlite_migrations under its own
-- migration set, beside the core's "letitloop" set), so a journal that never
-- holds a LangGraph checkpoint has no LangGraph tables.
--
-- IF NOT EXISTS: until this set existed, the core migration 0002_langgraph.sql
-- created these same tables, with this same SQL, in every journal file. In
-- such a file this migration finds them, changes nothing, and is recorded.
--
-- Ids, metadata and timestamps are text (metadata is JSON, so a SQLite browser
-- and json_extract() read it). The checkpoint itself and each pending write's
-- value are stored exactly as the saver's serde gives them: `type` is the
-- serde's tag ('msgpack' with LangGraph's default JsonPlusSerializer) and
-- `checkpoint` / `value` its bytes.

CREATE TABLE IF NOT EXISTS langgraph_checkpoints (
    thread_id            TEXT NOT NULL,
    checkpoint_ns        TEXT NOT NULL DEFAULT '',  -- '' for the root graph, 'node:task' inside subgraphs
    checkpoint_id        TEXT NOT NULL,             -- uuid6 text: sorts by creation
    parent_checkpoint_id TEXT,
    run_id               TEXT,                      -- metadata.run_id, for delete_for_runs
    source               TEXT,                      -- metadata.source: input | loop | update | fork
    step                 INTEGER,                   -- metadata.step
    ts                   TEXT,                      -- the checkpoint's ISO-8601 timestamp
    type                 TEXT NOT NULL,             -- the serde's type tag of `checkpoint`
    checkpoint           BLOB NOT NULL,
    metadata             TEXT NOT NULL,             -- JSON object
    PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id)
);
CREATE INDEX IF NOT EXISTS langgraph_checkpoints_run ON langgraph_checkpoints (run_id) WHERE run_id IS NOT NULL;

-- Pending writes: what a task wrote on top of a checkpoint before the next one.
CREATE TABLE IF NOT EXISTS langgraph_writes (
    thread_id     TEXT NOT NULL,
    checkpoint_ns TEXT NOT NULL DEFAULT '',
    checkpoint_id TEXT NOT NULL,
    task_id       TEXT NOT NULL,
    task_path     TEXT NOT NULL DEFAULT '',
    idx           INTEGER NOT NULL,                 -- position in the task's writes; <0 for special channels
    channel       TEXT NOT NULL,
    type          TEXT NOT NULL,                    -- the serde's type tag of `value`
    value         BLOB NOT NULL,
    PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id, task_id, idx)
);
