# Read a cluster managed elsewhere, e.g. in a node onboarding module.
data "ipam_cluster" "fra1" {
  name = "fra1"
}

resource "ipam_node_address" "node" {
  cluster_id = data.ipam_cluster.fra1.id
  node_id    = "fra1-node-05"
}

output "fra1_network" {
  value = {
    node_prefix     = data.ipam_cluster.fra1.node_prefix
    instance_prefix = data.ipam_cluster.fra1.instance_prefix
    gateway_ipv6    = data.ipam_cluster.fra1.gateway_ipv6
    mtu             = data.ipam_cluster.fra1.mtu
  }
}
