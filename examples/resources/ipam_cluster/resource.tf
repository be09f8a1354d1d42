# A cluster with a /48: the node and instance sub-prefixes default to the
# first two /64s (2001:db8:100::/64 and 2001:db8:100:1::/64).
resource "ipam_cluster" "example" {
  name   = "fra1"
  prefix = "2001:db8:100::/48"
}

# Everything set explicitly.
resource "ipam_cluster" "custom" {
  name            = "ams1"
  prefix          = "2001:db8:200::/48"
  node_prefix     = "2001:db8:200::/64"
  instance_prefix = "2001:db8:200:100::/56"

  node_cooldown     = "30d" # a removed node's address is held for 30 days
  instance_cooldown = "6h"  # at least "1h"

  # The WorkloadSpec network block handed to every instance.
  gateway_ipv6 = "fe80::1"
  mtu          = 1420
  dns_servers  = ["2001:db8:200::53", "2001:db8:200::54"]
}
