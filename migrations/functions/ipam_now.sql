-- The current definition of ipam_now: created by migration 6, last changed
-- by migration 8. Migrate applies it after the numbered migrations (see README.md
-- beside this file); a change here is a change of this one file.
--
-- ipam_now() in PL/pgSQL. As a SQL function it was never inlined (its body
-- reads ipam_clock in a subquery), so every statement that called it set up
-- and ran a SQL function per call site: 15 to 20 microseconds of server CPU
-- per call, several calls per allocation, and one in each trigger condition. PL/pgSQL keeps its plan per session, so a call costs about as much
-- as now(). Same result, same snapshot (a STABLE function reads with its
-- caller's).
CREATE OR REPLACE FUNCTION ipam_now() RETURNS timestamptz
    LANGUAGE plpgsql STABLE PARALLEL SAFE
    AS $$ BEGIN RETURN now() + coalesce((SELECT skew FROM ipam_clock WHERE singleton), interval '0'); END $$;
