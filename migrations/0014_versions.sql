-- letitloop schema, version 14: the version of the code each attempt ran.
--
-- A resumed run may run other code than the attempt before it (a deploy in
-- between). Each attempt records the version of the code it ran: the one
-- given (`Journal(..., version=)`, `@durable(..., version=)`), else the first
-- 12 hex digits of a BLAKE2b hash of the source file of the decorated function
-- (`@durable`) or of the code that made the `Journal` (letitloop/versions.py).
-- `lil runs` shows a run's latest attempt's version and filters on it
-- (`--version`); `lil show` says which attempts ran which version.

ALTER TABLE attempts ADD COLUMN version TEXT;  -- NULL: unknown (no source, or before 0014)
