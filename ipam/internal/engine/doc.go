// Package engine is the IP address manager's allocator: the Client and its
// paths (the one-statement hand-outs, the full path, plan-time holds,
// release), the SQL they run, the connection machinery (bounded waits,
// failover, statement modes), migrations and the operator's reads. Callers
// use it through the public packages ipam (the client, requests, results and
// errors) and ipam/operator (the operator's view, Operator); Go's internal
// rule keeps everyone else out, so the engine's layout can change without
// breaking a caller. DESIGN.md ("Architecture") describes its files' layers.
package engine
