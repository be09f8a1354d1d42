package ipam

import (
	"errors"
	"strings"
)

// The errors callers test with errors.Is. Each carries the spec's code
// (Code returns it).
var (
	// ErrExhausted: no address can be handed out from the pool right now
	// (ipam_exhausted). The failure is recorded.
	ErrExhausted = errors.New(CodeExhausted)
	// ErrUnavailable: no usable database server answered within the
	// failover bound: none could be reached, or those that answered were
	// read-only or shutting down (ipam_unavailable). The message names each
	// host and its answer.
	ErrUnavailable = errors.New(CodeUnavailable)
	// ErrRefused: a server answered and refused the connection for good:
	// credentials, a missing database, a startup parameter a pooler rejects
	// (ipam_refused). The message carries the server's answer.
	ErrRefused = errors.New(CodeRefused)
	// ErrOwnerConflict: the owner holds an address another actor (or another
	// configuration) manages (owner_conflict).
	ErrOwnerConflict = errors.New(CodeOwnerConflict)
	// ErrAddressTaken: an exact address asked for is in use or inside its
	// cooldown (address_in_use, address_cooling).
	ErrAddressTaken = errors.New("address_taken")
	// ErrInvalid: an input is not valid; the message names it (invalid_input).
	ErrInvalid = errors.New(CodeInvalid)
	// ErrNotFound: the cluster, pool or allocation does not exist (not_found).
	ErrNotFound = errors.New(CodeNotFound)
	// ErrConflict: a concurrent change kept the call from completing, or
	// something still depends on what was to be changed (conflict).
	ErrConflict = errors.New(CodeConflict)
	// ErrReadOnly: the role or the server may not write (read_only).
	ErrReadOnly = errors.New(CodeReadOnly)
	// ErrBusy: a lock another session holds was not released within the
	// lock timeout; nothing was written (ipam_busy).
	ErrBusy = errors.New(CodeBusy)
	// ErrTimeout: a statement ran past the statement timeout; nothing was
	// written (ipam_timeout).
	ErrTimeout = errors.New(CodeTimeout)
)

var sentinels = map[string]error{
	CodeExhausted:      ErrExhausted,
	CodeUnavailable:    ErrUnavailable,
	CodeOwnerConflict:  ErrOwnerConflict,
	CodeAddressInUse:   ErrAddressTaken,
	CodeAddressCooling: ErrAddressTaken,
	CodeInvalid:        ErrInvalid,
	CodeNotFound:       ErrNotFound,
	CodeConflict:       ErrConflict,
	CodeReadOnly:       ErrReadOnly,
	CodeBusy:           ErrBusy,
	CodeTimeout:        ErrTimeout,
	CodeRefused:        ErrRefused,
}

// isCode is the Is of each typed error: it matches the sentinel of its code.
func isCode(code string, target error) bool {
	s, ok := sentinels[code]
	return ok && s == target
}

// The core names a wrong input by its own name for it (cluster_id,
// owner_id, address, ...); a caller of this package filled in a request's
// fields. These maps name those fields instead.
var (
	instanceFields = requestFields("InstanceRequest", map[string]string{"cluster_id": "ClusterID", "pool_id": "ClusterID",
		"instance_id": "InstanceID", "owner_id": "InstanceID", "org_id": "OrgID", "env_id": "EnvID", "node_id": "NodeID",
		"address": "Address"})
	nodeFields = requestFields("NodeRequest", map[string]string{"cluster_id": "ClusterID", "pool_id": "ClusterID",
		"node_id": "NodeID", "owner_id": "NodeID", "address": "Address"})
	envIPv4Fields = requestFields("EnvIPv4Request", map[string]string{"cluster_id": "ClusterID", "pool_id": "Pool",
		"env_ipv4_id": "EnvID", "env_id": "EnvID", "owner_id": "EnvID", "org_id": "OrgID", "address": "Address"})
	releaseFields = map[string]string{"cluster_id": "clusterID", "instance_id": "instanceID", "node_id": "nodeID",
		"env_ipv4_id": "envID", "owner_id": "the owner's id"}
)

func requestFields(typ string, m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for core, field := range m {
		out[core] = typ + "." + field
	}
	return out
}

// nameInput renames a wrong input after the caller's field (a request's,
// or a parameter's); other errors pass through unchanged.
func nameInput(err error, fields map[string]string) error {
	var ie *InvalidError
	if errors.As(err, &ie) {
		if name, ok := fields[ie.Field]; ok {
			msg := ie.Msg
			if rest, found := strings.CutPrefix(msg, ie.Field+" "); found {
				msg = name + " " + rest
			}
			err = &InvalidError{Field: name, Index: ie.Index, Indexed: ie.Indexed, Msg: msg, Err: ie.Err}
		}
	}
	return err
}
