import {
  to = ipam_cluster.example
  id = "fra1"
}
