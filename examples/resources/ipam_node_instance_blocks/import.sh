# Node instance blocks are imported by <cluster_id>/<node_id>.
terraform import 'ipam_node_instance_blocks.node["fra1-node-02"]' fra1/fra1-node-02
