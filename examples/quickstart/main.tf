# Quickstart: one cluster, three nodes and one workload instance.
# `make demo` applies this against a throwaway PostgreSQL with a locally built
# provider; to run it yourself, set IPAM_DATABASE_URL first.

terraform {
  required_providers {
    ipam = {
      source = "overlayipam/ipam"
    }
  }
}

# database_url falls back to the IPAM_DATABASE_URL environment variable.
provider "ipam" {}

# A cluster owns an IPv6 prefix; node and instance pools are carved out of it
# (see the node_prefix and instance_prefix outputs).
resource "ipam_cluster" "demo" {
  name   = "demo"
  prefix = "2001:db8:abcd::/48"

  # Optional: node_cooldown ("30d"), instance_cooldown ("24h"), gateway_ipv6,
  # mtu and dns_servers (handed to instances).
}

# One address per node.
resource "ipam_node_address" "node" {
  for_each = toset(["node-a", "node-b", "node-c"])

  cluster_id = ipam_cluster.demo.id
  node_id    = each.key
}

# One address for a workload instance running on node-a.
resource "ipam_instance_address" "web" {
  cluster_id  = ipam_cluster.demo.id
  instance_id = "web-1"
  org_id      = "acme"
  env_id      = "prod"
  node_id     = "node-a"

  cluster_network_revision = ipam_cluster.demo.network_revision
}
