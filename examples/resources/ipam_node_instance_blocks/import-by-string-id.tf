import {
  to = ipam_node_instance_blocks.node["fra1-node-02"]
  id = "fra1/fra1-node-02"
}
