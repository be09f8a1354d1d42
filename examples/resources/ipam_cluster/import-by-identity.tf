import {
  to = ipam_cluster.example
  identity = {
    name = "fra1"
  }
}
