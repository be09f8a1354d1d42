import {
  to = ipam_node_address.example
  id = "fra1/fra1-node-01"
}
