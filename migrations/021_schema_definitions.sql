-- Migration 21: the current definition of each function lives in one file
-- of its own (functions/NAME.sql), not restated by every migration that
-- changes it. Migrate applies those files after the numbered migrations, in
-- the same transaction as its last step, under the migration lock: each one
-- whose checksum differs from the one recorded here, and all of them after
-- it applied a numbered migration (which may have replaced one). A change of
-- a definition comes with a numbered migration (functions/SUMS records at
-- which version each definition last changed, and a test holds it), so two
-- binaries of one schema version always have the same definitions.
CREATE TABLE ipam_schema_definitions (
    name       text PRIMARY KEY,
    checksum   text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
);
COMMENT ON TABLE ipam_schema_definitions IS
    'The function definitions (migrations/functions/*.sql) applied, by checksum (see migration 21).';

---- create above / drop below ----

DROP TABLE IF EXISTS ipam_schema_definitions;
