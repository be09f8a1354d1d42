-- The current definition of ipam_allocations_cooling: created by migration 8, last changed
-- by migration 8. Migrate applies it after the numbered migrations (see README.md
-- beside this file); a change here is a change of this one file.
CREATE OR REPLACE FUNCTION ipam_allocations_cooling() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
DECLARE
    now_at timestamptz := ipam_now();
    old_counted boolean := false;
    new_counted boolean := false;
BEGIN
    IF TG_OP IN ('UPDATE', 'DELETE') THEN
        old_counted := OLD.state = 'cooling' AND OLD.reusable_at > now_at;
    END IF;
    IF TG_OP = 'DELETE' AND NOT EXISTS (SELECT 1 FROM ipam_pools WHERE id = OLD.pool_id) THEN
        RETURN NULL; -- the pool is being deleted (a forced cluster delete): its counts go with it
    END IF;
    IF TG_OP IN ('UPDATE', 'INSERT') THEN
        new_counted := NEW.state = 'cooling' AND NEW.reusable_at > now_at;
    END IF;
    IF old_counted AND new_counted AND OLD.pool_id = NEW.pool_id
        AND ipam_cooling_bucket(OLD.reusable_at) = ipam_cooling_bucket(NEW.reusable_at) THEN
        RETURN NULL;
    END IF;
    IF old_counted THEN
        PERFORM ipam_count_cooling(OLD.pool_id, OLD.reusable_at, -1);
    END IF;
    IF new_counted THEN
        PERFORM ipam_count_cooling(NEW.pool_id, NEW.reusable_at, 1);
    END IF;
    RETURN NULL;
END
$$;
