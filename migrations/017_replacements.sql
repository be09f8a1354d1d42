-- Migration 17: a plan may mark an active allocation as being replaced, and
-- an allocation records the configuration that made it.
--
-- Terraform replaces a resource in two halves: a create of the new object
-- and a destroy of the old one, in that order under create_before_destroy.
-- Both halves are the same owner, and an owner holds one address, so the
-- create finds the old object's allocation, confirmed by the refreshes of
-- the state that manages it, and a confirmed allocation is not adopted by a
-- create (that would let a second configuration take it over). The plan
-- that saw the old object in its state and plans the new one marks the
-- allocation: until replace_until, and for as long as its generation is
-- replace_generation (any hand-out, adoption or release ends the mark), a
-- create of the same owner and actor takes it over: it keeps the address,
-- or releases it into cooldown for the owner and takes the new one. The
-- old object's destroy then carries an older generation and releases
-- nothing.
--
-- origin is the configuration that made an active allocation (for the
-- provider, its working directory, or the origin it is given), valid for
-- as long as its generation is origin_generation. A create that finds the
-- owner's unconfirmed allocation (a killed apply's work) adopts it only
-- from the same origin: another working directory declaring the same owner
-- is another configuration, and is refused with owner_conflict.
ALTER TABLE ipam_allocations
    ADD COLUMN replace_until      timestamptz,
    ADD COLUMN replace_generation bigint,
    ADD COLUMN origin             text,
    ADD COLUMN origin_generation  bigint;
