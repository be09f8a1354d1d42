package engine

// Operator is the operator's view of the allocator: the reads of ipamctl and
// of the provider's data sources (list, usage, lookup, leaks, check, metrics,
// events) and the operator's own writes (release, reclaim, recount). It shares
// its Client's pool, settings and actor; the public package ipam/operator
// names it operator.Client.
type Operator struct{ c *Client }

// OperatorOf returns the operator's view of c.
func OperatorOf(c *Client) *Operator { return &Operator{c: c} }
