# Every node address of cluster fra1 that no configuration manages yet:
#   terraform query -generate-config-out=adopted.tf
list "ipam_node_address" "fra1" {
  provider         = ipam
  include_resource = true

  config {
    cluster_id = "fra1"
  }
}
