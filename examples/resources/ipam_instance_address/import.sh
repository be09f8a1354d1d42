# An instance address is imported by <cluster_id>/<instance_id>.
terraform import ipam_instance_address.example fra1/inst-7f3a9c
