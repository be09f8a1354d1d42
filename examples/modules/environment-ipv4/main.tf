# The IPv4 add-on of one environment: one dedicated public IPv4 address from
# an operator pool. Released addresses cool down for the pool's cooldown.

resource "ipam_env_ipv4" "this" {
  pool_id = var.pool_id
  org_id  = var.org_id
  env_id  = var.env_id
  address = var.address
}
