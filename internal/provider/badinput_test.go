package provider

import (
	"context"
	"regexp"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
)

// badBase is applied first: bad input is then judged against an existing
// cluster and pool, so plan-time checks that read the database run too.
const badBase = `resource "ipam_cluster" "c" {
  name          = "c1"
  prefix        = "2001:db8::/48"
  force_destroy = true
}
resource "ipam_pool" "v4" {
  cluster_id    = ipam_cluster.c.id
  name          = "v4"
  cidrs         = ["198.51.100.0/24"]
  force_destroy = true
}
`

// badInput is one hostile or malformed input.
type badInput struct {
	name string
	// provider holds options for the provider block; with rawProvider the
	// whole provider block (the test database URL is not used).
	provider    string
	rawProvider bool
	hcl         string // added to badBase
	attr        string // the attribute the diagnostic must name
	expect      string // regexp the error must match; it names attr
	// atApply: Terraform cannot know at plan time (the input is well formed
	// and only the database can refuse it); the apply fails and writes nothing.
	atApply bool
}

var long10k = strings.Repeat("a", 10000)

func nodeRes(body string) string {
	return "resource \"ipam_node_address\" \"bad\" {\n  cluster_id = \"c1\"\n" + body + "\n}\n"
}

func instanceRes(body string) string {
	return "resource \"ipam_instance_address\" \"bad\" {\n  cluster_id = \"c1\"\n" + body + "\n}\n"
}

func clusterRes(body string) string {
	return "resource \"ipam_cluster\" \"bad\" {\n" + body + "\n}\n"
}

func poolRes(body string) string {
	return "resource \"ipam_pool\" \"bad\" {\n  cluster_id = \"c1\"\n  name = \"bad\"\n" + body + "\n}\n"
}

func blocksRes(body string) string {
	return "resource \"ipam_node_instance_blocks\" \"bad\" {\n  cluster_id = \"c1\"\n  node_id = \"n1\"\n" + body + "\n}\n"
}

func setRes(body string) string {
	return "resource \"ipam_address_set\" \"bad\" {\n  cluster_id = \"c1\"\n  owner_id = \"s1\"\n" + body + "\n}\n"
}

func ipv4Res(body string) string {
	return "resource \"ipam_env_ipv4\" \"bad\" {\n  org_id = \"acme\"\n" + body + "\n}\n"
}

// badInputs is the table. Every entry must fail with a diagnostic naming its
// attribute, at validate or plan time unless atApply, and write nothing.
var badInputs = []badInput{
	// Provider options.
	{name: "max_connections zero", provider: "max_connections = 0", attr: "max_connections", expect: `max_connections\s+value\s+must\s+be\s+between\s+1\s+and\s+1000`},
	{name: "max_connections negative", provider: "max_connections = -5", attr: "max_connections", expect: `max_connections\s+value\s+must\s+be\s+between`},
	{name: "connect_timeout negative", provider: `connect_timeout = "-1s"`, attr: "connect_timeout", expect: `Invalid connect_timeout.*is\s+negative`},
	{name: "connect_timeout nonsense", provider: `connect_timeout = "10 parsecs"`, attr: "connect_timeout", expect: `Invalid connect_timeout.*not a valid\s+duration`},
	{name: "reservation_ttl zero", provider: `reservation_ttl = "0s"`, attr: "reservation_ttl", expect: `Invalid reservation_ttl.*shorter\s+than\s+the\s+minimum`},
	{name: "actor with SQL", provider: `actor = "ci'; DROP TABLE ipam_events; --"`, attr: "actor", expect: `Invalid actor.*may\s+only\s+contain`},
	{name: "actor of 10,000 characters", provider: `actor = "` + long10k + `"`, attr: "actor", expect: `Invalid actor.*10000\s+characters\s+long`},
	{name: "database_url unparsable", rawProvider: true, provider: `database_url = "postgres://ipam:pw@127.0.0.1:notaport/db"`, attr: "database_url", expect: `(?s)database_url.*cannot\s+be\s+parsed`},
	{name: "database_url with an unescaped @ in its password", rawProvider: true, provider: `database_url = "postgres://ipam:pw@rd@127.0.0.1:5432/db"`, attr: "database_url", expect: `(?s)database_url.*not\s+percent-encoded.*%40`},
	{name: "database_url bad sslmode", rawProvider: true, provider: `database_url = "host=127.0.0.1 port=5432 sslmode=bogus"`, attr: "database_url", expect: `(?s)database_url.*cannot\s+be\s+parsed`},

	// ipam_cluster.
	{name: "cluster /129", hcl: clusterRes(`name = "c2"` + "\n" + `prefix = "2001:db8:1::/129"`), attr: "prefix", expect: `Invalid prefix.*not a valid CIDR`},
	{name: "cluster IPv4 prefix", hcl: clusterRes(`name = "c2"` + "\n" + `prefix = "10.0.0.0/8"`), attr: "prefix", expect: `Invalid prefix.*not an IPv6\s+prefix`},
	{name: "cluster IPv4-mapped prefix", hcl: clusterRes(`name = "c2"` + "\n" + `prefix = "::ffff:1.2.3.4/128"`), attr: "prefix", expect: `Invalid prefix.*IPv4-mapped`},
	{name: "cluster zone in prefix", hcl: clusterRes(`name = "c2"` + "\n" + `prefix = "fe80::%eth0/64"`), attr: "prefix", expect: `Invalid prefix.*zones`},
	{name: "cluster host bits", hcl: clusterRes(`name = "c2"` + "\n" + `prefix = "2001:db8:1::1/48"`), attr: "prefix", expect: `Invalid prefix.*host bits`},
	{name: "cluster prefix too small", hcl: clusterRes(`name = "c2"` + "\n" + `prefix = "2001:db8:1::/96"`), attr: "prefix", expect: `Invalid prefix.*at\s+least\s+a\s+/64`},
	{name: "cluster prefix with a trailing space", hcl: clusterRes(`name = "c2"` + "\n" + `prefix = "2001:db8:1::/48 "`), attr: "prefix", expect: `Invalid prefix.*whitespace`},
	{name: "cluster prefix garbage", hcl: clusterRes(`name = "c2"` + "\n" + `prefix = "all of them"`), attr: "prefix", expect: `Invalid prefix.*not a valid CIDR`},
	{name: "cluster name with SQL", hcl: clusterRes(`name = "c2'; DROP TABLE ipam_clusters; --"` + "\n" + `prefix = "2001:db8:1::/48"`), attr: "name", expect: `Invalid name.*may only\s+contain`},
	{name: "cluster name of 10,000 characters", hcl: clusterRes(`name = "` + long10k + `"` + "\n" + `prefix = "2001:db8:1::/48"`), attr: "name", expect: `Invalid name.*10000\s+characters\s+long`},
	{name: "cluster name with NUL", hcl: clusterRes(`name = "c\u0000two"` + "\n" + `prefix = "2001:db8:1::/48"`), attr: "name", expect: `Invalid name.*may only\s+contain`},
	{name: "cluster name empty", hcl: clusterRes(`name = ""` + "\n" + `prefix = "2001:db8:1::/48"`), attr: "name", expect: `Invalid name.*must not be\s+empty`},
	{name: "cluster name with a homoglyph", hcl: clusterRes(`name = "сluster"` + "\n" + `prefix = "2001:db8:1::/48"`), attr: "name", expect: `Invalid name.*may only\s+contain`},
	{name: "instance cooldown tiny", hcl: clusterRes(`name = "c2"` + "\n" + `prefix = "2001:db8:1::/48"` + "\n" + `instance_cooldown = "30m"`), attr: "instance_cooldown", expect: `Invalid instance_cooldown.*shorter than the\s+minimum of 1h`},
	{name: "instance cooldown zero", hcl: clusterRes(`name = "c2"` + "\n" + `prefix = "2001:db8:1::/48"` + "\n" + `instance_cooldown = "0s"`), attr: "instance_cooldown", expect: `Invalid instance_cooldown.*shorter than the\s+minimum`},
	{name: "node cooldown negative", hcl: clusterRes(`name = "c2"` + "\n" + `prefix = "2001:db8:1::/48"` + "\n" + `node_cooldown = "-24h"`), attr: "node_cooldown", expect: `Invalid node_cooldown.*is\s+negative`},
	{name: "node cooldown ISO 8601", hcl: clusterRes(`name = "c2"` + "\n" + `prefix = "2001:db8:1::/48"` + "\n" + `node_cooldown = "P30D"`), attr: "node_cooldown", expect: `Invalid node_cooldown.*not a valid\s+duration`},
	{name: "node cooldown overflowing", hcl: clusterRes(`name = "c2"` + "\n" + `prefix = "2001:db8:1::/48"` + "\n" + `node_cooldown = "99999999999d"`), attr: "node_cooldown", expect: `Invalid node_cooldown.*too\s+long\s+a\s+duration`},
	{name: "gateway with zone", hcl: clusterRes(`name = "c2"` + "\n" + `prefix = "2001:db8:1::/48"` + "\n" + `gateway_ipv6 = "fe80::1%eth0"`), attr: "gateway_ipv6", expect: `Invalid gateway_ipv6.*zones`},
	{name: "gateway IPv4-mapped", hcl: clusterRes(`name = "c2"` + "\n" + `prefix = "2001:db8:1::/48"` + "\n" + `gateway_ipv6 = "::ffff:10.0.0.1"`), attr: "gateway_ipv6", expect: `Invalid gateway_ipv6.*IPv4-mapped`},
	{name: "node prefix outside the cluster", hcl: clusterRes(`name = "c2"` + "\n" + `prefix = "2001:db8:1::/48"` + "\n" + `node_prefix = "2001:db9::/64"`), attr: "node_prefix", expect: `(?s)Invalid Cluster Sub-Prefix.*node_prefix.*not inside the cluster\s+prefix`},
	{name: "sub-prefixes overlapping", hcl: clusterRes(`name = "c2"` + "\n" + `prefix = "2001:db8:1::/48"` + "\n" + `node_prefix = "2001:db8:1:5::/64"` + "\n" + `instance_prefix = "2001:db8:1:5::/80"`), attr: "instance_prefix", expect: `(?s)Invalid Cluster Sub-Prefix.*instance_prefix.*overlaps the node\s+prefix`},
	{name: "duplicate DNS servers", hcl: clusterRes(`name = "c2"` + "\n" + `prefix = "2001:db8:1::/48"` + "\n" + `dns_servers = ["2001:db8::53", "2001:db8::53"]`), attr: "dns_servers", expect: `(?s)dns_servers.*duplicate`},
	{name: "IPv4 DNS server", hcl: clusterRes(`name = "c2"` + "\n" + `prefix = "2001:db8:1::/48"` + "\n" + `dns_servers = ["8.8.8.8"]`), attr: "dns_servers", expect: `Invalid dns_servers\[0\].*not an IPv6\s+address`},
	{name: "MTU below IPv6 minimum", hcl: clusterRes(`name = "c2"` + "\n" + `prefix = "2001:db8:1::/48"` + "\n" + `mtu = 1279`), attr: "mtu", expect: `mtu\s+value\s+must\s+be\s+between\s+1280\s+and\s+65535`},
	{name: "node_prefix with host bits", hcl: clusterRes(`name = "c2"` + "\n" + `prefix = "2001:db8:200::/48"` + "\n" + `node_prefix = "2001:DB8:200::1/48"`), attr: "node_prefix", expect: `Invalid node_prefix.*host bits`},
	{name: "instance_prefix with host bits", hcl: clusterRes(`name = "c2"` + "\n" + `prefix = "2001:db8:200::/48"` + "\n" + `instance_prefix = "2001:db8:200:1::1/64"`), attr: "instance_prefix", expect: `Invalid instance_prefix.*host bits`},
	{name: "cluster prefix with host bits, upper case", hcl: clusterRes(`name = "c2"` + "\n" + `prefix = "2001:DB8:200::1/48"`), attr: "prefix", expect: `Invalid prefix.*host bits`},
	{name: "DNS server not an address", hcl: clusterRes(`name = "c2"` + "\n" + `prefix = "2001:db8:1::/48"` + "\n" + `dns_servers = ["dns.example"]`), attr: "dns_servers", expect: `Invalid dns_servers\[0\].*"dns\.example"\s+is\s+not\s+a\s+valid\s+IPv6\s+address\s+\(expected\s+e\.g\.\s+2001:db8::53\)`},
	{name: "DNS server with zone", hcl: clusterRes(`name = "c2"` + "\n" + `prefix = "2001:db8:1::/48"` + "\n" + `dns_servers = ["fe80::53%eth0"]`), attr: "dns_servers", expect: `Invalid dns_servers\[0\].*zones`},
	{name: "DNS server null", hcl: clusterRes(`name = "c2"` + "\n" + `prefix = "2001:db8:1::/48"` + "\n" + `dns_servers = [null]`), attr: "dns_servers", expect: `Invalid dns_servers\[0\].*is null`},
	{name: "MTU 2^40", hcl: clusterRes(`name = "c2"` + "\n" + `prefix = "2001:db8:1::/48"` + "\n" + `mtu = 1099511627776`), attr: "mtu", expect: `mtu\s+value\s+must\s+be\s+between\s+1280\s+and\s+65535`},
	{name: "cluster name with an RTL override", hcl: clusterRes(`name = "c\u202e2"` + "\n" + `prefix = "2001:db8:1::/48"`), attr: "name", expect: `Invalid name.*may only\s+contain`},
	{name: "cluster prefix overlapping cluster c1", hcl: clusterRes(`name = "c2"` + "\n" + `prefix = "2001:db8::/32"`), attr: "prefix", expect: `(?s)Invalid Cluster.*prefix.*overlaps cluster\s+"c1"`},

	// ipam_node_address.
	{name: "node id with SQL", hcl: nodeRes(`node_id = "n1' OR '1'='1"`), attr: "node_id", expect: `Invalid node_id.*may only\s+contain`},
	{name: "node id of 10,000 characters", hcl: nodeRes(`node_id = "` + long10k + `"`), attr: "node_id", expect: `Invalid node_id.*10000\s+characters\s+long`},
	{name: "node id with NUL", hcl: nodeRes(`node_id = "n\u0000"`), attr: "node_id", expect: `Invalid node_id.*may only\s+contain`},
	{name: "node id with a newline", hcl: nodeRes(`node_id = "node\nb"`), attr: "node_id", expect: `Invalid node_id.*may only\s+contain`},
	{name: "node id a path", hcl: nodeRes(`node_id = "../../etc/passwd"`), attr: "node_id", expect: `Invalid node_id.*may only\s+contain`},
	{name: "node address with zone", hcl: nodeRes(`node_id = "n1"` + "\n" + `address = "fe80::1%eth0"`), attr: "address", expect: `Invalid address.*zones`},
	{name: "node address IPv4-mapped", hcl: nodeRes(`node_id = "n1"` + "\n" + `address = "::ffff:1.2.3.4"`), attr: "address", expect: `Invalid address.*IPv4-mapped`},
	{name: "node address with prefix length", hcl: nodeRes(`node_id = "n1"` + "\n" + `address = "2001:db8::1/128"`), attr: "address", expect: `Invalid address.*prefix\s+lengths`},
	{name: "node address IPv4", hcl: nodeRes(`node_id = "n1"` + "\n" + `address = "10.0.0.1"`), attr: "address", expect: `Invalid address.*not an IPv6\s+address`},
	{name: "node address outside the node prefix", hcl: nodeRes(`node_id = "n1"` + "\n" + `address = "2001:db8:1::5"`), attr: "address", expect: `(?s)Address Cannot Be Claimed.*address.*outside\s+pool\s+"c1/node"`},
	{name: "node address the subnet-router anycast", hcl: nodeRes(`node_id = "n1"` + "\n" + `address = "2001:db8::"`), attr: "address", expect: `(?s)Address Cannot Be Claimed.*address.*never\s+handed\s+out`},
	{name: "node cluster id empty", hcl: "resource \"ipam_node_address\" \"bad\" {\n  cluster_id = \"\"\n  node_id = \"n1\"\n}\n", attr: "cluster_id", expect: `Invalid cluster_id.*must not be\s+empty`},
	{name: "node_id set twice (duplicate key)", hcl: nodeRes(`node_id = "a"` + "\n" + `node_id = "b"`), attr: "node_id", expect: `(?s)Attribute redefined.*"node_id"`},
	{name: "two resources with one name (duplicate key)", hcl: nodeRes(`node_id = "a"`) + nodeRes(`node_id = "b"`), attr: "ipam_node_address", expect: `(?s)Duplicate resource "ipam_node_address"`},

	// ipam_instance_address.
	{name: "instance id with SQL", hcl: instanceRes(`instance_id = "i-1; DELETE FROM ipam_allocations"` + "\n" + `org_id = "acme"` + "\n" + `env_id = "prod"`), attr: "instance_id", expect: `Invalid instance_id.*may only\s+contain`},
	{name: "org id with a quote", hcl: instanceRes(`instance_id = "i-1"` + "\n" + `org_id = "acme\"; --"` + "\n" + `env_id = "prod"`), attr: "org_id", expect: `Invalid org_id.*may only\s+contain`},
	{name: "env id empty", hcl: instanceRes(`instance_id = "i-1"` + "\n" + `org_id = "acme"` + "\n" + `env_id = ""`), attr: "env_id", expect: `Invalid env_id.*must not be\s+empty`},
	{name: "instance node label of 10,000 characters", hcl: instanceRes(`instance_id = "i-1"` + "\n" + `org_id = "acme"` + "\n" + `env_id = "prod"` + "\n" + `node_id = "` + long10k + `"`), attr: "node_id", expect: `Invalid node_id.*10000\s+characters`},
	{name: "instance address with escaped zone", hcl: instanceRes(`instance_id = "i-1"` + "\n" + `org_id = "acme"` + "\n" + `env_id = "prod"` + "\n" + `address = "2001:db8:0:1::1%25eth0"`), attr: "address", expect: `Invalid address.*zones`},
	{name: "instance address in the node prefix", hcl: instanceRes(`instance_id = "i-1"` + "\n" + `org_id = "acme"` + "\n" + `env_id = "prod"` + "\n" + `address = "2001:db8::7"`), attr: "address", expect: `(?s)Address Cannot Be Claimed.*address.*outside\s+pool\s+"c1/instance"`},

	// ipam_pool.
	{name: "pool of mixed families", hcl: poolRes(`cidrs = ["192.0.2.0/24", "2001:db8:ff::/64"]`), attr: "cidrs", expect: `(?s)Invalid Pool.*cidrs`},
	{name: "pool block /33", hcl: poolRes(`cidrs = ["192.0.2.0/33"]`), attr: "cidrs", expect: `Invalid cidrs\[0\].*not a valid CIDR`},
	{name: "pool overlapping pool c1/v4", hcl: poolRes(`cidrs = ["198.51.100.128/25"]`), attr: "cidrs", expect: `(?s)Invalid Pool.*cidrs.*overlaps\s+198\.51\.100\.0/24\s+of\s+pool\s+"c1/v4"`},
	{name: "pool blocks overlapping each other", hcl: poolRes(`cidrs = ["192.0.2.0/24", "192.0.2.128/25"]`), attr: "cidrs", expect: `(?s)Invalid Pool.*cidrs.*overlap`},
	{name: "pool block given twice (duplicate key)", hcl: poolRes(`cidrs = ["192.0.2.0/24", "192.0.2.0/24"]`), attr: "cidrs", expect: `(?s)Invalid Pool.*cidrs.*overlap`},
	{name: "pool exclusion outside the pool", hcl: poolRes(`cidrs = ["192.0.2.0/24"]` + "\n" + `exclude = ["203.0.113.5"]`), attr: "exclude", expect: `(?s)Invalid Pool.*exclude.*not\s+inside\s+any\s+block`},
	{name: "pool exclusion with zone", hcl: poolRes(`cidrs = ["192.0.2.0/24"]` + "\n" + `exclude = ["fe80::1%eth0"]`), attr: "exclude", expect: `Invalid exclude\[0\].*zones`},
	{name: "pool cooldown negative", hcl: poolRes(`cidrs = ["192.0.2.0/24"]` + "\n" + `cooldown = "-1s"`), attr: "cooldown", expect: `Invalid cooldown.*is\s+negative`},
	{name: "pool without blocks", hcl: poolRes(`cidrs = []`), attr: "cidrs", expect: `(?s)cidrs.*at\s+least\s+1`},
	{name: "pool named like a system pool", hcl: "resource \"ipam_pool\" \"bad\" {\n  cluster_id = \"c1\"\n  name = \"node\"\n  cidrs = [\"192.0.2.0/24\"]\n}\n", attr: "name", expect: `(?s)Invalid Pool.*name.*cluster's\s+own\s+pool`},
	{name: "pool over the node prefix", hcl: poolRes(`cidrs = ["2001:db8::/64"]`), attr: "cidrs", expect: `(?s)Invalid Pool.*cidrs.*overlaps\s+the\s+node\s+prefix`},
	{name: "pool gateway of the wrong family", hcl: poolRes(`cidrs = ["192.0.2.0/24"]` + "\n" + `gateway = "2001:db8:ff::1"`), attr: "gateway", expect: `(?s)Invalid Pool.*gateway.*family`},
	{name: "pool with a null block", hcl: poolRes(`cidrs = [null]`), attr: "cidrs", expect: `Invalid cidrs\[0\].*is null`},
	{name: "pool with an empty block", hcl: poolRes(`cidrs = [""]`), attr: "cidrs", expect: `Invalid cidrs\[0\].*not a valid CIDR`},
	{name: "pool exclusion null", hcl: poolRes(`cidrs = ["192.0.2.0/24"]` + "\n" + `exclude = [null]`), attr: "exclude", expect: `Invalid exclude\[0\].*is null`},
	{name: "pool gateway with zone", hcl: poolRes(`cidrs = ["2001:db8:ff::/64"]` + "\n" + `gateway = "fe80::1%eth0"`), attr: "gateway", expect: `Invalid gateway.*zones`},
	{name: "pool MTU -1", hcl: poolRes(`cidrs = ["192.0.2.0/24"]` + "\n" + `mtu = -1`), attr: "mtu", expect: `mtu\s+value\s+must\s+be\s+between\s+68\s+and\s+65535`},
	{name: "pool MTU 2^40", hcl: poolRes(`cidrs = ["192.0.2.0/24"]` + "\n" + `mtu = 1099511627776`), attr: "mtu", expect: `mtu\s+value\s+must\s+be\s+between\s+68\s+and\s+65535`},
	{name: "pool name with NUL", hcl: "resource \"ipam_pool\" \"bad\" {\n  cluster_id = \"c1\"\n  name = \"v\u00004\"\n  cidrs = [\"192.0.2.0/24\"]\n}\n", attr: "name", expect: `Invalid name.*may only\s+contain`},
	{name: "pool block IPv4-mapped", hcl: poolRes(`cidrs = ["::ffff:198.51.100.0/120"]`), attr: "cidrs", expect: `Invalid cidrs\[0\].*IPv4-mapped`},
	{name: "pool of the whole IPv4 internet", hcl: poolRes(`cidrs = ["0.0.0.0/0"]`), attr: "cidrs", expect: `(?s)Invalid Pool.*cidrs.*mixes\s+public\s+and\s+private`},
	{name: "pool of public IPv4 too large", hcl: poolRes(`cidrs = ["64.0.0.0/3"]`), attr: "cidrs", expect: `(?s)Invalid Pool.*cidrs.*at\s+most\s+1048576`},

	// ipam_env_ipv4.
	{name: "pool id without a slash", hcl: ipv4Res(`pool_id = "v4"` + "\n" + `env_id = "prod"`), attr: "pool_id", expect: `Invalid pool_id.*not a pool id`},
	{name: "pool id with a path", hcl: ipv4Res(`pool_id = "c1/v4/../../x"` + "\n" + `env_id = "prod"`), attr: "pool_id", expect: `Invalid pool_id.*may only\s+contain`},
	{name: "IPv4 the network address", hcl: ipv4Res(`pool_id = "c1/v4"` + "\n" + `env_id = "prod"` + "\n" + `address = "198.51.100.0"`), attr: "address", expect: `(?s)Address Cannot Be Claimed.*address.*never\s+handed\s+out`},
	{name: "IPv4 outside the pool", hcl: ipv4Res(`pool_id = "c1/v4"` + "\n" + `env_id = "prod"` + "\n" + `address = "192.0.2.1"`), attr: "address", expect: `(?s)Address Cannot Be Claimed.*address.*outside\s+pool`},
	{name: "env id of 10,000 characters", hcl: ipv4Res(`pool_id = "c1/v4"` + "\n" + `env_id = "` + long10k + `"`), attr: "env_id", expect: `Invalid env_id.*10000\s+characters`},
	{name: "IPv4 from a pool that does not exist", atApply: true, hcl: ipv4Res(`pool_id = "c1/nope"` + "\n" + `env_id = "prod"`), attr: "pool_id", expect: `(?s)pool_id.*pool\s+c1/nope\s+does\s+not\s+exist`},

	{name: "pool id with NUL", hcl: ipv4Res(`pool_id = "c1/v\u00004"` + "\n" + `env_id = "prod"`), attr: "pool_id", expect: `Invalid pool_id.*may only\s+contain`},
	{name: "cluster id in a pool id with NUL", hcl: ipv4Res(`pool_id = "c\u00001/v4"` + "\n" + `env_id = "prod"`), attr: "pool_id", expect: `Invalid pool_id.*may only\s+contain`},

	// ipam_node_instance_blocks.
	{name: "blocks /65 (2^63 addresses a block)", hcl: blocksRes(`block_prefix_length = 65` + "\n" + `max_blocks = 1`), attr: "block_prefix_length", expect: `(?s)Invalid block_prefix_length.*blocks\s+of\s+2\^`},
	{name: "blocks /66 x 2", hcl: blocksRes(`block_prefix_length = 66` + "\n" + `max_blocks = 2`), attr: "block_prefix_length", expect: `(?s)Invalid block_prefix_length.*blocks\s+of\s+2\^`},
	{name: "blocks max_blocks near MaxInt64", hcl: blocksRes(`max_blocks = 9223372036854775807`), attr: "max_blocks", expect: `(?s)Invalid max_blocks.*max_blocks\s+9223372036854775807\s+are\s+too\s+many`},
	{name: "blocks /129", hcl: blocksRes(`block_prefix_length = 129`), attr: "block_prefix_length", expect: `block_prefix_length\s+value\s+must\s+be\s+between\s+65\s+and\s+128`},
	{name: "blocks max_free below min_free + 1", hcl: blocksRes(`min_free_fraction = 0.5` + "\n" + `max_free_fraction = 1`), attr: "max_free_fraction", expect: `(?s)Invalid max_free_fraction.*at\s+least\s+min_free_fraction\s+\+\s+1`},
	{name: "blocks demand negative", hcl: blocksRes(`demand = -1`), attr: "demand", expect: `demand\s+value\s+must\s+be\s+at\s+least\s+0`},
	{name: "blocks node id with SQL", hcl: "resource \"ipam_node_instance_blocks\" \"bad\" {\n  cluster_id = \"c1\"\n  node_id = \"n1'; --\"\n}\n", attr: "node_id", expect: `Invalid node_id.*may only\s+contain`},

	// ipam_address_set.
	{name: "set key with SQL", hcl: setRes(`addresses = { "a'; --" = { family = "ipv6" } }`), attr: "addresses", expect: `(?s)addresses.*key`},
	{name: "set key of 64 characters", hcl: setRes(`addresses = { "` + strings.Repeat("k", 64) + `" = { family = "ipv6" } }`), attr: "addresses", expect: `(?s)addresses.*key`},
	{name: "set key with NUL", hcl: setRes(`addresses = { "k\u0000" = { family = "ipv6" } }`), attr: "addresses", expect: `(?s)addresses.*key`},
	{name: "set pool id with NUL", hcl: setRes(`addresses = { a = { pools = ["c1/v\u00004"] } }`), attr: "pools", expect: `(?s)Invalid addresses\["a"\]\.pools\[0\].*may only\s+contain`},
	{name: "set pool null", hcl: setRes(`addresses = { a = { pools = [null] } }`), attr: "pools", expect: `(?s)Invalid addresses\["a"\]\.pools\[0\].*is null`},
	{name: "set address with zone", hcl: setRes(`addresses = { a = { address = "fe80::1%eth0" } }`), attr: "address", expect: `(?s)Invalid addresses\["a"\]\.address.*zones`},
	{name: "set family ipv5", hcl: setRes(`addresses = { a = { family = "ipv5" } }`), attr: "family", expect: `(?s)family.*value\s+must\s+be\s+one\s+of`},
	{name: "set owner id with an RTL override", hcl: "resource \"ipam_address_set\" \"bad\" {\n  cluster_id = \"c1\"\n  owner_id = \"s\u202e1\"\n  addresses = { a = { family = \"ipv6\" } }\n}\n", attr: "owner_id", expect: `Invalid owner_id.*may only\s+contain`},

	// data source ipam_cluster.
	{name: "data source name with SQL", hcl: "data \"ipam_cluster\" \"bad\" {\n  name = \"x'; --\"\n}\n", attr: "name", expect: `Invalid name.*may only\s+contain`},
	{name: "data source name empty", hcl: "data \"ipam_cluster\" \"bad\" {\n  name = \"\"\n}\n", attr: "name", expect: `Invalid name.*must not be\s+empty`},
	{name: "data source name of 10,000 characters", hcl: "data \"ipam_cluster\" \"bad\" {\n  name = \"" + long10k + "\"\n}\n", attr: "name", expect: `Invalid name.*10000\s+characters`},
	{name: "data source of a cluster that does not exist", hcl: "data \"ipam_cluster\" \"bad\" {\n  name = \"nope\"\n}\n", attr: "name", expect: `(?s)Cluster Not Found.*name.*No cluster is named nope`},

	// Encoding: HCL source must be UTF-8; Terraform refuses it before any provider sees it.
	{name: "invalid UTF-8 in an id", hcl: nodeRes("node_id = \"n\xff\xfe\""), attr: "node_id", expect: `(?s)Invalid character encoding.*node_id|(?s)node_id.*UTF-8`},
}

// rowCounts counts the rows of every table of the IPAM's schema, in one
// statement.
func rowCounts(t *testing.T, url string) string {
	t.Helper()
	ctx := context.Background()
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	var out string
	if err := c.QueryRow(ctx, `SELECT string_agg(table_name || '=' || (xpath('/row/c/text()',
			query_to_xml(format('SELECT count(*) AS c FROM %I', table_name), false, true, '')))[1]::text, ' ' ORDER BY table_name)
		FROM information_schema.tables WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'`).Scan(&out); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestAccBadInput_table runs every bad input against a database that holds a
// cluster and a pool, and counts the rows of every table before and after
// each one: no bad input writes anything, not even a plan-time hold.
func TestAccBadInput_table(t *testing.T) {
	db := newAccDB(t)
	snapshot := func() string { return rowCounts(t, db.URL) }
	var baseline, previous string
	unchanged := func() {
		if got := snapshot(); got != baseline {
			t.Errorf("after %s the row counts changed: %s, before: %s", previous, got, baseline)
			baseline = got
		}
	}
	steps := []resource.TestStep{{
		Config: db.config(badBase),
		Check:  func(*terraform.State) error { baseline = snapshot(); return nil },
	}}
	seen := map[string]bool{}
	for _, c := range badInputs {
		if seen[c.name] {
			t.Fatalf("duplicate case %q", c.name)
		}
		seen[c.name] = true
		if !strings.Contains(c.expect, c.attr) {
			t.Fatalf("%s: the expected error %q does not name the attribute %s", c.name, c.expect, c.attr)
		}
		cfg := db.configWith("  "+c.provider, badBase+c.hcl)
		if c.rawProvider {
			cfg = "provider \"ipam\" {\n  " + c.provider + "\n}\n\n" + badBase + c.hcl
		}
		steps = append(steps, resource.TestStep{
			PreConfig:   func() { unchanged(); previous = c.name },
			Config:      cfg,
			PlanOnly:    !c.atApply,
			ExpectError: regexp.MustCompile(`(?s)` + c.expect),
		})
	}
	steps = append(steps, resource.TestStep{
		PreConfig: unchanged,
		Config:    db.config(badBase),
		PlanOnly:  true,
	})
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps:                    steps,
	})
	if !t.Failed() {
		atApply := 0
		for _, c := range badInputs {
			if c.atApply {
				atApply++
			}
		}
		t.Logf("%d bad inputs: %d refused at validate or plan time, %d at apply (only the database can tell); rows unchanged after each: %s",
			len(badInputs), len(badInputs)-atApply, atApply, baseline)
	}
}
