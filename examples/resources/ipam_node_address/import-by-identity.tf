import {
  to = ipam_node_address.example
  identity = {
    cluster_id = "fra1"
    node_id    = "fra1-node-01"
  }
}
