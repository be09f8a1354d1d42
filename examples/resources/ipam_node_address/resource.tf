# One stable overlay address per node, the next free one of the cluster's node
# prefix.
resource "ipam_node_address" "example" {
  cluster_id = ipam_cluster.example.id
  node_id    = "fra1-node-01"
}

# Several nodes at once.
resource "ipam_node_address" "workers" {
  for_each = toset(["fra1-node-02", "fra1-node-03", "fra1-node-04"])

  cluster_id = ipam_cluster.example.id
  node_id    = each.key
}

# Claiming an exact address, e.g. when moving an existing node under IPAM.
resource "ipam_node_address" "bastion" {
  cluster_id = ipam_cluster.example.id
  node_id    = "fra1-bastion"
  address    = "2001:db8:100::100"
}

output "node_addresses" {
  value = merge(
    { (ipam_node_address.example.node_id) = ipam_node_address.example.address },
    { for id, n in ipam_node_address.workers : id => n.address },
  )
}
