# Each node holds aligned /124 blocks (16 addresses) of the instance prefix,
# sized to demand: with mf = 0.5, 25 expected instances give
# ceil(0.5 + 25/16) = 3 blocks, 48 addresses. Instances placed on the node
# take addresses inside its blocks, so WireGuard can route whole blocks.
resource "ipam_node_instance_blocks" "node" {
  for_each = ipam_node_address.workers # fra1-node-02, -03 and -04

  cluster_id          = ipam_cluster.example.id
  node_id             = each.value.node_id
  block_prefix_length = 124
  min_free_fraction   = 0.5
  max_free_fraction   = 1.5
  max_blocks          = 32
  demand              = 25 # leave unset to follow the node's current use
}

# Instances placed on a full node grow its blocks when they take their
# addresses, after this resource was applied: read the blocks after them.
data "ipam_node_instance_blocks" "node" {
  for_each   = ipam_node_instance_blocks.node
  cluster_id = each.value.cluster_id
  node_id    = each.value.node_id
  depends_on = [ipam_instance_address.on_node, ipam_address_set.on_node]
}

output "allowed_ips" {
  # The WireGuard AllowedIPs of each node's peer entry: its /128 and its blocks.
  value = {
    for id, b in data.ipam_node_instance_blocks.node :
    id => concat([ipam_node_address.workers[id].cidr], b.blocks)
  }
}

# Instances on a node with blocks take node_id from the blocks resource:
# Terraform creates the blocks first and destroys the instances first, and
# an apply that creates both places the instances inside the blocks.
resource "ipam_instance_address" "on_node" {
  cluster_id  = ipam_cluster.example.id
  instance_id = "inst-2b81d0"
  org_id      = "acme"
  env_id      = "production"
  node_id     = ipam_node_instance_blocks.node["fra1-node-02"].node_id
}

# More addresses inside a node's blocks: an address set's key lists the
# node's pool_id. Like the node's instances, it grows the blocks when they
# are full, up to max_blocks.
resource "ipam_address_set" "on_node" {
  cluster_id  = ipam_cluster.example.id
  owner_id    = "inst-2b81d0-extra"
  org_id      = "acme"
  env_id      = "production"
  instance_id = "inst-2b81d0"

  addresses = {
    storage = { pools = [ipam_node_instance_blocks.node["fra1-node-02"].pool_id] }
  }
}
