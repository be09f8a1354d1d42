-- Migration 20: a node's instance blocks can be replaced like an address.
--
-- generation counts who has held a node's blocks: a create that takes them
-- over (a retried apply's adoption, or the create half of a replacement)
-- moves it on, so the destroy of the object it replaced, carrying the
-- generation its state read, releases nothing. A plan that replaces the
-- blocks' resource marks them (replace_until, replace_generation, as
-- migration 17 does for an allocation): until then, and while the
-- generation is still the marked one, a create of the same actor takes them
-- over instead of refusing them as another configuration's. Blocks made
-- before this version have generation 1.
ALTER TABLE ipam_node_block_settings
  ADD COLUMN generation         bigint NOT NULL DEFAULT 1,
  ADD COLUMN replace_until      timestamptz,
  ADD COLUMN replace_generation bigint;

---- create above / drop below ----

ALTER TABLE ipam_node_block_settings
  DROP COLUMN generation,
  DROP COLUMN replace_until,
  DROP COLUMN replace_generation;
