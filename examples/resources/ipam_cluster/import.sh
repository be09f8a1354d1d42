# A cluster is imported by its name.
terraform import ipam_cluster.example fra1
