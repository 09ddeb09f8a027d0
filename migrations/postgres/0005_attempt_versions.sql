-- The version of the code each attempt ran (letitloop/versions.py): lil runs --version.
ALTER TABLE ll_attempts ADD COLUMN IF NOT EXISTS version text;
