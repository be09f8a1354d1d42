-- Migration 30: a refresh reads an allocation and records that it saw it in
-- one statement.
--
-- A Terraform refresh (the provider's read, GetActive) records that it saw
-- the allocation: last_seen_at at most once an hour, and confirmed_at at the
-- first refresh after the create. That record was a second statement in a
-- transaction of its own after the read: two round trips and two commits at
-- the first refresh of every new address, and at every refresh an hour or
-- more after the last. The read now calls ipam_record_seen (its definition is
-- functions/ipam_record_seen.sql) when, and only when, the record is due. As a
-- data-modifying CTE in the read, the update was set up at every read, due
-- or not: a read with nothing to record cost 30 % more. Measured with
-- pgbench on one allocation, one client: a read with a record due 763 µs
-- as two statements, 604 µs as one (most of either is the commit's WAL
-- flush); a read with nothing due 148 µs before and after.
--
-- Nothing else changes: no table, no index, no row. (The step needs a
-- statement; the function comes with the definitions.)
SELECT 1;

---- create above / drop below ----

DROP FUNCTION IF EXISTS ipam_record_seen(uuid, bigint);
