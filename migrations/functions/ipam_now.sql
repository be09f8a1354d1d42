-- The current definition of ipam_now: created by migration 6, last changed
-- by migration 36. Migrate applies it after the numbered migrations (see README.md
-- beside this file); a change here is a change of this one file.
--
-- ipam_now() in PL/pgSQL. As a SQL function it was never inlined (its body
-- reads ipam_clock in a subquery), so every statement that called it set up
-- and ran a SQL function per call site: 15 to 20 microseconds of server CPU
-- per call, several calls per allocation, and one in each trigger condition. PL/pgSQL keeps its plan per session, so a call costs about as much
-- as now(). Same result, same snapshot (a STABLE function reads with its
-- caller's).
--
-- Which time (migration 36). A READ COMMITTED transaction, the only kind
-- that writes allocations, reads every statement with a snapshot of its
-- own, so it judges a row by the statement's time: statement_timestamp(),
-- the time the statement's message came in, the same for every call in the
-- statement (its triggers too). The transaction's start (now()) was older
-- than the snapshot of any statement but its first: a transaction that
-- began before a release saw the released address, and judged it still
-- cooling (released "after" it) in a pool without a cooldown. The
-- statement's snapshot is taken after that time (at its Execute message),
-- so a release it sees was stamped before. A transaction of one snapshot
-- (REPEATABLE READ and SERIALIZABLE: the reads that span statements, such
-- as ipamctl check and a pool's usage) keeps one time for all of it, the
-- transaction's start, so that its statements judge every row alike.
CREATE OR REPLACE FUNCTION ipam_now() RETURNS timestamptz
    LANGUAGE plpgsql STABLE PARALLEL SAFE
    AS $$
BEGIN
    IF current_setting('transaction_isolation') = 'read committed' THEN
        RETURN statement_timestamp() + coalesce((SELECT skew FROM ipam_clock WHERE singleton), interval '0');
    END IF;
    RETURN now() + coalesce((SELECT skew FROM ipam_clock WHERE singleton), interval '0');
END $$;
