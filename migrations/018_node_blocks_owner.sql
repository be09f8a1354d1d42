-- Migration 18: a node's instance blocks record the actor that created them,
-- when, and when a Terraform state confirmed them (a refresh or an import
-- read them). A create that finds a node's blocks adopts them by the rule of
-- every allocation: only its own unconfirmed work of the last hour (a retried
-- or killed apply); anything else is refused with owner_conflict and an
-- import ID. Blocks made before this version are taken as confirmed.
ALTER TABLE ipam_node_block_settings
  ADD COLUMN actor text,
  ADD COLUMN created_at timestamptz,
  ADD COLUMN confirmed_at timestamptz;

UPDATE ipam_node_block_settings SET created_at = updated_at, confirmed_at = updated_at;

ALTER TABLE ipam_node_block_settings
  ALTER COLUMN created_at SET DEFAULT now(),
  ALTER COLUMN created_at SET NOT NULL;

---- create above / drop below ----

ALTER TABLE ipam_node_block_settings
  DROP COLUMN actor,
  DROP COLUMN created_at,
  DROP COLUMN confirmed_at;
