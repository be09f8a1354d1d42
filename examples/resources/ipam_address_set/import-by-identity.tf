import {
  to = ipam_address_set.vm
  identity = {
    cluster_id = "fra1"
    owner_id   = "vm-7f3a"
  }
}
