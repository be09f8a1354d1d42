# A WireGuard peer for a node: its overlay address and its instance blocks,
# as the fewest CIDRs.
output "allowed_ips" {
  value = join(", ", provider::ipam::wireguard_allowed_ips(concat(
    [ipam_node_address.worker.address],
    ipam_node_instance_blocks.worker.blocks,
  )))
}
