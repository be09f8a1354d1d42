import {
  to = ipam_instance_address.example
  identity = {
    cluster_id  = "fra1"
    instance_id = "inst-7f3a9c"
  }
}
