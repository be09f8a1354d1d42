output "addresses" {
  description = "Node ID => overlay address (a plain IPv6 address, the node's WireGuard interface address)."
  value       = { for node, a in ipam_node_address.this : node => a.address }

  precondition {
    condition     = length(setsubtract(keys(var.addresses), var.nodes)) == 0
    error_message = "addresses names nodes that are not in nodes: ${join(", ", setsubtract(keys(var.addresses), var.nodes))}."
  }
}

output "cidrs" {
  description = "Node ID => overlay address as a /128."
  value       = { for node, a in ipam_node_address.this : node => a.cidr }
}

output "allowed_ips" {
  description = "Node ID => WireGuard peer AllowedIPs of the node: its /128 and its instance_blocks, sorted, with adjacent blocks merged (provider::ipam::wireguard_allowed_ips)."
  value       = local.allowed_ips

  precondition {
    condition     = length(setsubtract(keys(var.instance_blocks), var.nodes)) == 0
    error_message = "instance_blocks names nodes that are not in nodes: ${join(", ", setsubtract(keys(var.instance_blocks), var.nodes))}."
  }
}

output "wireguard_peers" {
  description = "Node ID => { address, allowed_ips } where allowed_ips is the comma-separated AllowedIPs line of the node's [Peer] section in wg-quick configs."
  value = {
    for node, ips in local.allowed_ips : node => {
      address     = ipam_node_address.this[node].address
      allowed_ips = join(", ", ips)
    }
  }
}

output "ids" {
  description = "Node ID => resource ID (`<cluster_id>/<node_id>`), the import ID of each address."
  value       = { for node, a in ipam_node_address.this : node => a.id }
}
