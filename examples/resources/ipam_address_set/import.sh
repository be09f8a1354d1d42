# A whole address set is imported by <cluster_id>/<owner_id>.
terraform import ipam_address_set.vm fra1/vm-7f3a
