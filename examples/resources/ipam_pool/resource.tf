# The operator's public IPv4 blocks for the paid IPv4 add-on. Earlier blocks
# are handed out first; network and broadcast addresses are never handed out,
# and neither are the exclusions (the gaps).
resource "ipam_pool" "public_v4" {
  cluster_id = ipam_cluster.example.id
  name       = "public-v4"
  cidrs      = ["198.51.100.0/24", "203.0.113.0/25"]
  exclude    = ["198.51.100.1", "198.51.100.240/28"]
  cooldown   = "24h"
}

# A second pool, tried when the first is full (see ipam_address_set).
resource "ipam_pool" "overflow_v4" {
  cluster_id = ipam_cluster.example.id
  name       = "overflow-v4"
  cidrs      = ["192.0.2.0/26"]
}

output "public_v4_size" {
  value = ipam_pool.public_v4.size # known at plan time
}
