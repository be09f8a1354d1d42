-- Migration 22: a replacement mark records the configuration that made it.
--
-- A plan that replaces an allocation marks it (migration 17) so that the
-- create half of the replacement takes it over. The mark named only the
-- actor, so another configuration of the same actor (another working
-- directory, its own state) declaring the same owner within the mark's
-- time took the allocation over too, and both states then held it. The
-- mark now records the origin of the plan that made it (replace_origin),
-- and only a create from that origin takes the allocation over.
ALTER TABLE ipam_allocations ADD COLUMN replace_origin text;

---- create above / drop below ----

ALTER TABLE ipam_allocations DROP COLUMN replace_origin;
