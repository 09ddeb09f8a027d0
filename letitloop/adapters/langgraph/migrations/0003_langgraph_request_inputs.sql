-- The LangGraph saver's request log keeps each request's input: migration set
-- "letitloop.langgraph", number 3.
--
-- A request killed before LangGraph saved anything of it (its input checkpoint
-- is written in the background under durability="async") can then be resumed
-- without the caller giving its input again: resume(graph, config) reads it
-- here (letitloop/adapters/langgraph/resuming.py). The input is stored as the
-- saver's serde gives it, as checkpoints are: its tag in input_type, its bytes
-- in input. One row per row of langgraph_requests whose input could be encoded,
-- written in the same transaction; deleted with it.

CREATE TABLE IF NOT EXISTS langgraph_request_inputs (
    thread_id  TEXT NOT NULL,
    seq        INTEGER NOT NULL,    -- the request's seq in langgraph_requests
    input_type TEXT NOT NULL,       -- the serde's tag ('msgpack' with the default serializer)
    input      BLOB NOT NULL,
    PRIMARY KEY (thread_id, seq)
);
