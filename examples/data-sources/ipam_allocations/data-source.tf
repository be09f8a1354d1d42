# Every address an environment holds: instances and its IPv4 add-on.
data "ipam_allocations" "acme_prod" {
  cluster_id = "fra1"
  org_id     = "acme"
  env_id     = "prod"
}

# Released instance addresses still cooling down.
data "ipam_allocations" "cooling" {
  cluster_id = "fra1"
  category   = "instance"
  state      = "cooling"
}

output "acme_prod_addresses" {
  value = { for a in data.ipam_allocations.acme_prod.allocations : a.owner_id => a.address }
}
