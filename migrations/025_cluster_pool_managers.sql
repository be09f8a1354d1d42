-- Migration 25: clusters and pools record who manages them, as allocations
-- do: the origin of the configuration that created one (creator_origin, the
-- transaction's ipam.origin, written by the trigger below on insert) and
-- when a read of the provider first saw it (read_at: a refresh or an
-- import). A `terraform query` listing leaves out, unless asked, what a
-- Terraform state already holds. The columns' names differ from the
-- allocations' (origin, confirmed_at) so that statements joining the tables
-- stay unambiguous.
ALTER TABLE ipam_clusters ADD COLUMN creator_origin text, ADD COLUMN read_at timestamptz;
ALTER TABLE ipam_pools ADD COLUMN creator_origin text, ADD COLUMN read_at timestamptz;

-- The function's definition is functions/ipam_record_creator_origin.sql
-- (applied after this migration); the triggers need it now.
CREATE OR REPLACE FUNCTION ipam_record_creator_origin() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    NEW.creator_origin := nullif(current_setting('ipam.origin', true), '');
    RETURN NEW;
END
$$;
CREATE TRIGGER ipam_clusters_creator_origin BEFORE INSERT ON ipam_clusters
    FOR EACH ROW EXECUTE FUNCTION ipam_record_creator_origin();
CREATE TRIGGER ipam_pools_creator_origin BEFORE INSERT ON ipam_pools
    FOR EACH ROW EXECUTE FUNCTION ipam_record_creator_origin();

---- create above / drop below ----

DROP TRIGGER IF EXISTS ipam_pools_creator_origin ON ipam_pools;
DROP TRIGGER IF EXISTS ipam_clusters_creator_origin ON ipam_clusters;
DROP FUNCTION IF EXISTS ipam_record_creator_origin();
ALTER TABLE ipam_pools DROP COLUMN IF EXISTS creator_origin, DROP COLUMN IF EXISTS read_at;
ALTER TABLE ipam_clusters DROP COLUMN IF EXISTS creator_origin, DROP COLUMN IF EXISTS read_at;
