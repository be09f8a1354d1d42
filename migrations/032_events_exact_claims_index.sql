-- Migration 32: the events' address index keeps only exact claims, so a
-- release writes no entry in it.
--
-- ipam_events_address held the events the check read by address: the
-- releases that record a reusable time (the cooldown audit looked up, for
-- each hand-out, the address's latest release before it) and the exact
-- claims (the counter check's exemption). The cooldown audit now reads the
-- cluster's hand-outs and releases once, sorted by address and time
-- (sqlCheckCooldown): a probe per hand-out took 12 s at a million
-- allocations, the sort 6 s. So the index keeps the one read left, whether
-- an address was claimed exactly (sqlCheckCounterOrdinals), and every
-- release writes one index entry fewer.
--
-- Upgrading builds the index again: the events are locked for writes while
-- the build reads them (0.6 s at 1,500,000 events).

DROP INDEX ipam_events_address;
CREATE INDEX ipam_events_address ON ipam_events (cluster_id, address)
    WHERE data->>'exact' = 'true';

---- create above / drop below ----

DROP INDEX ipam_events_address;
CREATE INDEX ipam_events_address ON ipam_events (cluster_id, address, at)
    WHERE data ? 'reusable_at' OR data->>'exact' = 'true';
