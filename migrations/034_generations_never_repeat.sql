-- Migration 34: a generation never repeats.
--
-- A generation counted the hand-outs of one row (a fresh row started at 1),
-- and a node's blocks counted theirs from 1 whenever they were made again.
-- So an owner could hold two allocations of one generation in turn: its
-- first address, released, then another fresh one (a claim, another pool),
-- and the destroy of a state that still carried the first released the
-- second. Every hand-out (an address handed to an owner, a hold confirmed,
-- an allocation adopted, a node's blocks made or taken over) now takes its
-- generation from the sequence ipam_generations, so a generation names one
-- hand-out of one owner, ever.
--
-- The sequence starts past every generation the database still records
-- (rows, tombstones, events, node blocks, replacement marks), so that no
-- state written before it can name a later hand-out. A role that hands out
-- addresses needs USAGE on it: every role that may update the allocations
-- now (a runtime role set up as the database setup guide says) gets it
-- here, so that an upgrade does not stop its allocations.
CREATE SEQUENCE ipam_generations AS bigint;

DO $$
DECLARE
    r record;
BEGIN
    FOR r IN SELECT DISTINCT a.grantee FROM pg_class c, aclexplode(c.relacl) a
        WHERE c.oid = 'ipam_allocations'::regclass AND a.privilege_type = 'UPDATE' AND a.grantee <> c.relowner
    LOOP
        EXECUTE 'GRANT USAGE ON SEQUENCE ipam_generations TO '
            || CASE WHEN r.grantee = 0 THEN 'PUBLIC' ELSE quote_ident(pg_get_userbyid(r.grantee)) END;
    END LOOP;
END
$$;

SELECT setval('ipam_generations', greatest(1,
    (SELECT max(generation) FROM ipam_allocations),
    (SELECT max(replace_generation) FROM ipam_allocations),
    (SELECT max(origin_generation) FROM ipam_allocations),
    (SELECT max(generation) FROM ipam_tombstones),
    (SELECT max(generation) FROM ipam_events),
    (SELECT max(generation) FROM ipam_node_block_settings),
    (SELECT max(replace_generation) FROM ipam_node_block_settings)));

ALTER TABLE ipam_node_block_settings ALTER COLUMN generation SET DEFAULT nextval('ipam_generations');

---- create above / drop below ----

ALTER TABLE ipam_node_block_settings ALTER COLUMN generation SET DEFAULT 1;
DROP SEQUENCE ipam_generations;
