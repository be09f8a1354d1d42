# Who holds (or last held) an address seen in a flow log?
data "ipam_address" "suspect" {
  address = "2001:db8:100:1::2a"
}

output "owner" {
  value = {
    state       = data.ipam_address.suspect.state
    org_id      = data.ipam_address.suspect.org_id
    env_id      = data.ipam_address.suspect.env_id
    instance_id = data.ipam_address.suspect.instance_id
    last_holder = data.ipam_address.suspect.last_holder
    reusable_at = data.ipam_address.suspect.reusable_at
  }
}
