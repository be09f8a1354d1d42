# A node's instance blocks as they are now: for the node's WireGuard peer
# entry in a configuration that does not manage the blocks (a node
# onboarding module, say).
data "ipam_node_instance_blocks" "fra1_node_02" {
  cluster_id = "fra1"
  node_id    = "fra1-node-02"
}

output "fra1_node_02_instance_blocks" {
  value = data.ipam_node_instance_blocks.fra1_node_02.blocks
}
