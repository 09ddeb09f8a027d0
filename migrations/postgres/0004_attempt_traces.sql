-- An attempt's span as a W3C traceparent (letitloop/otel.py): a resumed attempt's span
-- links to the crashed one's.
ALTER TABLE ll_attempts ADD COLUMN IF NOT EXISTS trace text;
