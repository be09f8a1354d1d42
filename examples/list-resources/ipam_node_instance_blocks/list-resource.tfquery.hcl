# Every node of cluster fra1 that holds instance blocks, to adopt its
# ipam_node_instance_blocks with `terraform query -generate-config-out=blocks.tf`.
list "ipam_node_instance_blocks" "nodes" {
  provider         = ipam
  include_resource = true
  config {
    cluster_id = "fra1"
  }
}
