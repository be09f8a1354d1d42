# Who holds (or last held) an address seen in a flow log?
data "ipam_address" "suspect" {
  address = "198.51.100.10"
}

output "owner" {
  value = {
    state       = data.ipam_address.suspect.state
    org_id      = data.ipam_address.suspect.org_id
    env_id      = data.ipam_address.suspect.env_id
    owner_kind  = data.ipam_address.suspect.owner_kind
    owner_id    = data.ipam_address.suspect.owner_id
    last_holder = data.ipam_address.suspect.last_holder
    reusable_at = data.ipam_address.suspect.reusable_at
  }
}
