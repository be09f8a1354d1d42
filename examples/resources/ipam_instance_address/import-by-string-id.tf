import {
  to = ipam_instance_address.example
  id = "fra1/inst-7f3a9c"
}
