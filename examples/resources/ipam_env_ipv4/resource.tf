# The IPv4 add-on of one environment: a dedicated address, the oldest free one
# of the pool.
resource "ipam_env_ipv4" "shop_prod" {
  pool_id = ipam_pool.public_v4.id
  org_id  = "acme"
  env_id  = "shop-prod"
}

# Keeping a known address, e.g. one already published in DNS.
resource "ipam_env_ipv4" "blog_prod" {
  pool_id = ipam_pool.public_v4.id
  org_id  = "acme"
  env_id  = "blog-prod"
  address = "198.51.100.10"
}

output "shop_prod_ipv4" {
  value = ipam_env_ipv4.shop_prod.address
}
