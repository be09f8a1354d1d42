import {
  to = ipam_node_instance_blocks.node["fra1-node-02"]
  identity = {
    cluster_id = "fra1"
    node_id    = "fra1-node-02"
  }
}
