-- Migration 25: clusters and pools record who manages them, as allocations
-- do: the origin of the configuration that created one (the transaction's
-- ipam.origin, written by the statement that inserts it) and when a read of
-- the provider first saw it (a refresh or an import). A `terraform query`
-- listing leaves out, unless asked, what a Terraform state already holds.
ALTER TABLE ipam_clusters ADD COLUMN origin text, ADD COLUMN confirmed_at timestamptz;
ALTER TABLE ipam_pools ADD COLUMN origin text, ADD COLUMN confirmed_at timestamptz;

---- create above / drop below ----

ALTER TABLE ipam_pools DROP COLUMN IF EXISTS origin, DROP COLUMN IF EXISTS confirmed_at;
ALTER TABLE ipam_clusters DROP COLUMN IF EXISTS origin, DROP COLUMN IF EXISTS confirmed_at;
