import {
  to = ipam_address_set.vm
  id = "fra1/vm-7f3a"
}
