-- letitloop schema, version 9: changes nothing in the file; it marks the file
-- as made by a letitloop whose LangGraph tables are the adapter's.
--
-- From this version on a new journal gets the LangGraph saver's tables only
-- when a saver first opens it (the adapter's own migration set,
-- "letitloop.langgraph"; see 0002_langgraph.sql). A letitloop that knows only
-- migrations up to 0008 would take such a file for fully migrated and its
-- saver would then find no tables; this record makes it refuse the file as
-- written by a newer letitloop instead, with the file left untouched.

SELECT 1;
