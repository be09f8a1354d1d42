import {
  to = ipam_node_instance_blocks.node["fra1-node-01"]
  id = "fra1/fra1-node-01"
}
