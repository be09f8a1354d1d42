# A node address is imported by <cluster_id>/<node_id>.
terraform import ipam_node_address.example fra1/fra1-node-01
