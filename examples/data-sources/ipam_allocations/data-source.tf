# Every address an environment holds: instances and its IPv4 add-on.
data "ipam_allocations" "shop_prod" {
  cluster_id = "fra1"
  org_id     = "acme"
  env_id     = "shop-prod"
}

# Released instance addresses still cooling down.
data "ipam_allocations" "cooling" {
  cluster_id = "fra1"
  category   = "instance"
  state      = "cooling"
}

output "shop_prod_addresses" {
  value = { for a in data.ipam_allocations.shop_prod.allocations : a.owner_id => a.address }
}
