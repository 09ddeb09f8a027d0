-- letitloop schema, version 16: an attempt's OpenTelemetry span.
--
-- With OpenTelemetry on (letitloop/otel.py, docs/observability.md), each
-- attempt records the span it runs under, so that the next attempt of the run
-- (after a crash, a failure, a wait) links its own span to it: one run's
-- attempts are found together in a tracing tool, whatever trace each ran in.
-- Migrations 0013 to 0015 are other changes of the same release.

-- the attempt's span as a W3C traceparent ('00-<trace id>-<span id>-<flags>');
-- NULL when the attempt ran without OpenTelemetry, and in attempts before 0016
ALTER TABLE attempts ADD COLUMN trace TEXT;
