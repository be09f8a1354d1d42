# A WireGuard peer for a node: its overlay address and its instance blocks
# (read after the instances placed on it), as the fewest CIDRs.
output "wireguard_peer_allowed_ips" {
  value = join(", ", provider::ipam::wireguard_allowed_ips(concat(
    [ipam_node_address.workers["fra1-node-02"].address],
    data.ipam_node_instance_blocks.node["fra1-node-02"].blocks,
  )))
}
