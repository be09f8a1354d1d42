-- Migration 36: ipam_now() is the statement's time in a READ COMMITTED
-- transaction.
--
-- It was now(), the transaction's start. Every statement of a READ COMMITTED
-- transaction reads with a snapshot of its own, taken after the statement
-- came in, so a transaction that began before a release saw the released
-- row and judged it by a time older than the release: an address released
-- into a pool without a cooldown (or a plan's hold that a claim dropped)
-- was still cooling to it, and the pool exhausted, or a claim of the
-- address address_cooling, though the address was free. A statement now
-- judges by its own time, statement_timestamp(). A transaction of one
-- snapshot (REPEATABLE READ, SERIALIZABLE: the reads that span statements)
-- keeps the transaction's start for all of its statements. The definition
-- is in functions/ipam_now.sql, applied after this.
SELECT 1;

---- create above / drop below ----

SELECT 1;
