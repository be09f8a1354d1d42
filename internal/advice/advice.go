// Package advice names each class of the IPAM core's errors and says what to
// do about it: the one source of that text for the provider's diagnostics
// and ipamctl's messages, so the two never give different advice.
package advice

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/overlayipam/terraform-provider-ipam/ipam"
)

// Explanation is what a failure is called and what to do about it.
type Explanation struct {
	// Code is the error's code ("" when it has none).
	Code string
	// Title names the class, in title case ("IPAM Database Unreachable").
	Title string
	// Advice says what to do, in whole sentences.
	Advice string
	// Connection is true for the classes that say nothing about the
	// request itself: the database could not be reached or used, so the
	// operation never ran (unreachable, refused, busy, timed out, read-only,
	// a missing grant, schema mismatch).
	Connection bool
}

// Codes lists every code For explains, for tests and generated tables.
var Codes = []string{
	ipam.CodeRefused, ipam.CodeUnavailable, ipam.CodeBusy, ipam.CodeTimeout, ipam.CodeReadOnly, ipam.CodeDenied, ipam.CodeSchema,
	ipam.CodeExhausted, ipam.CodeOwnerConflict, ipam.CodeAddressInUse, ipam.CodeAddressCooling, ipam.CodeInvalid,
	ipam.CodeNotFound, ipam.CodeConflict, ipam.CodeHoldLost,
}

// For explains err.
func For(err error) Explanation {
	code := ipam.Code(err)
	e := Explanation{Code: code}
	switch code {
	case ipam.CodeRefused:
		e.Title, e.Connection = "IPAM Database Refused the Connection", true
		e.Advice = "A server answered and refused the connection for good, so waiting or retrying will not help. " +
			"Check the credentials (the user name and password of database_url or ipamctl's --database-url, IPAM_DATABASE_URL or PGUSER/PGPASSWORD), " +
			"the database name (it must exist, and the role must be allowed to connect to it), and the TLS settings " +
			"(sslmode, sslrootcert: the server's certificate must verify, and a pooler must accept the connection's startup parameters)."
	case ipam.CodeUnavailable:
		e.Title, e.Connection = "IPAM Database Unreachable", true
		e.Advice = unavailable(err)
	case ipam.CodeBusy:
		e.Title, e.Connection = "IPAM Database Busy", true
		e.Advice = busy(err)
	case ipam.CodeTimeout:
		e.Title, e.Connection = "IPAM Statement Timed Out", true
		e.Advice = "A statement ran past statement_timeout and was canceled; nothing was written. The server is overloaded " +
			"or the bound is too short for this operation: check the server's load (pg_stat_activity), then try again, or " +
			"raise statement_timeout (provider) / --statement-timeout (ipamctl)."
		var te *ipam.TimeoutError
		if errors.As(err, &te) && te.Holders != "" {
			e.Advice = "A statement ran past statement_timeout while it waited for a lock another session held (named " +
				"above); nothing was written. Find that session (pg_stat_activity, pg_locks), let it finish or end it, and " +
				"try again; set lock_timeout below statement_timeout so that a lock wait ends as ipam_busy first."
		}
		if errors.As(err, &te) && te.Take {
			e.Advice = "The call did not answer within its own bound (lock_timeout and 2 s) and was canceled; nothing was " +
				"written. Most often it waited for a lock while its statement was prepared: a session that locks the IPAM's " +
				"tables (LOCK TABLE, a schema change, VACUUM FULL) and was done before the call looked for it. Look for such " +
				"sessions (pg_stat_activity, pg_locks) and try again; else the server is overloaded, or, through PgBouncer, " +
				"its pool had no server connection free: " + poolSizing
		}
		if errors.As(err, &te) && te.Take && te.Unanswered {
			e.Advice = "The call did not answer within its own bound (lock_timeout and 2 s) and was canceled; nothing was " +
				"written, and a look at the server's locks got no answer either. Check the server's load (pg_stat_activity); " +
				"through PgBouncer, check that its pool has a server connection for every client (SHOW POOLS: cl_waiting): " + poolSizing
		}
	case ipam.CodeReadOnly:
		e.Title, e.Connection = "IPAM Database Is Read-Only", true
		e.Advice = "The database refused a write: the server (or session) is read-only, as a standby is. Connect to the " +
			"primary (list every host with target_session_attrs=read-write). Planning works against a standby; applying does not."
	case ipam.CodeDenied:
		e.Title, e.Connection = "IPAM Database Role Lacks a Grant", true
		e.Advice = "The database role may not read or write what the message names (a table, a sequence or the schema). " +
			"Give it the grants of the database setup guide: SELECT, INSERT, UPDATE and DELETE on the IPAM's tables and USAGE " +
			"on its sequences. A role that only plans needs SELECT alone (its plans then take no plan-time holds); applying " +
			"needs the rest. Migrations need the schema's owner (`ipamctl migrate up` as that role)."
	case ipam.CodeSchema:
		e.Title, e.Connection = "IPAM Database Schema Mismatch", true
		e.Advice = "The database schema is not the one this binary was built for. If it is older, run `ipamctl migrate up` " +
			"as the schema's owner role (a provider that connects as that role migrates it itself with auto_migrate = true). If it is newer, upgrade the provider or ipamctl to the " +
			"version that migrated it; `ipamctl migrate status` shows both versions."
	case ipam.CodeExhausted:
		e.Title = "Pool Exhausted"
		e.Advice = "Nothing was allocated. Add blocks to the pool (a cluster's node and instance prefixes are fixed: use a " +
			"larger prefix for a new cluster), release unused addresses (`ipamctl leaks`, `ipamctl release`), or wait for " +
			"cooling addresses to become reusable (the message says when the next one does)."
	case ipam.CodeOwnerConflict:
		e.Title = "Owner Managed Elsewhere"
		var oc *ipam.OwnerConflictError
		if errors.As(err, &oc) && oc.Held {
			e.Advice = "Another configuration's plan holds the owner (the message names the plan's configuration and when " +
				"its hold expires), and nothing was allocated. Apply that plan where it was made (or with the same origin), " +
				"or wait for its hold to expire; if that plan is abandoned, `ipamctl expire-hold` ends its hold now. An " +
				"owner holds one address in a cluster: two configurations cannot both declare it."
			break
		}
		e.Advice = "The owner already holds an address that another configuration or actor manages, and nothing was " +
			"allocated. If this configuration should manage it, import it (with the import ID given with it) and remove it " +
			"from the configuration that manages it now; if it is left over, release it with `ipamctl release`. An owner " +
			"holds one address in a cluster, whatever the actor: two configurations cannot both declare it, so keep it in " +
			"one of them (or give the other its own owner ID)."
	case ipam.CodeAddressInUse:
		e.Title = "Address In Use"
		var iu *ipam.AddressInUseError
		if errors.As(err, &iu) && iu.State == ipam.StateReserved {
			e.Advice = "The exact address asked for is held by another owner's plan-time hold until the time given. Ask for " +
				"another address, leave it unset to get a free one, or wait; if that plan is abandoned, " +
				"`ipamctl expire-hold ADDRESS` ends its hold now."
			break
		}
		e.Advice = "The exact address asked for is held by another owner (or by another owner's plan-time hold). Ask for " +
			"another address, or leave it unset to get a free one; `ipamctl lookup ADDRESS` names the holder, and " +
			"`ipamctl release` frees it if its holder is gone."
	case ipam.CodeAddressCooling:
		e.Title = "Address Cooling Down"
		e.Advice = "The exact address asked for was released and is inside its cooldown, so only its last owner may take " +
			"it back until the time given. Ask for another address, leave it unset to get a free one, or wait."
	case ipam.CodeInvalid:
		e.Title = "Invalid Input"
		e.Advice = "Correct the input named above; nothing was written."
	case ipam.CodeNotFound:
		e.Title = "Not Found"
		e.Advice = "The cluster, pool, allocation or plan-time hold named does not exist (or no longer does); when " +
			"something else holds the address or owner, the message says what. Check the name (`ipamctl usage` lists " +
			"clusters and pools, `ipamctl lookup ADDRESS` what holds an address), or create it first."
	case ipam.CodeConflict:
		var ce *ipam.ConflictError
		var confirmed *ipam.ConfirmedError
		if errors.As(err, &confirmed) {
			e.Title = "Held by a Terraform State"
			e.Advice = "Nothing was released: a Terraform configuration holds this allocation and still uses it. Remove " +
				"its owner from that configuration and apply. Release it anyway only if that configuration is gone for " +
				"good (`ipamctl release --force`): its next refresh drops the resource, and its next apply allocates for the " +
				"owner again, which gets the same address back (an owner's own cooling address comes first)."
			break
		}
		if errors.As(err, &ce) && ce.ExistingKind != "" {
			e.Title = "Already Exists"
			e.Advice = "The " + ce.ExistingKind + " " + ce.ExistingID + " already exists, and nothing was written. If this " +
				"configuration should manage it, import it (with the import ID given with it); otherwise choose another name."
			break
		}
		e.Title = "Conflicting Change"
		e.Advice = "Existing data, or a change made at the same time, kept this from completing; nothing was written. " +
			"If something still depends on what was to change, the message names it: remove or release that first. " +
			"Otherwise try again."
	case ipam.CodeHoldLost:
		e.Title = "Planned Address Taken"
		e.Advice = "The plan's hold on the address expired and another owner took it. Nothing was allocated: run the plan " +
			"again (it reserves a new address) and apply that plan."
	default:
		e.Title = "IPAM Error"
		e.Advice = "This failure has no IPAM error code; the message above is the underlying one. Whether anything was " +
			"written cannot be told from it: `ipamctl check` verifies the database's invariants."
	}
	return e
}

// unavailable names the host and port tried and how long the call waited.
func unavailable(err error) string {
	var ue *ipam.UnavailableError
	if !errors.As(err, &ue) {
		return "No usable database server answered. Check the host and port of the connection string, and that " +
			"PostgreSQL runs and accepts connections there."
	}
	var b strings.Builder
	switch {
	case ue.NoSlots:
		fmt.Fprintf(&b, "The server at %s has no connection slot left for this role: the role's CONNECTION LIMIT or the "+
			"server's max_connections is reached. Find who holds the connections (pg_stat_activity), raise the limit, "+
			"lower the connections each client opens (the provider's and ipamctl's max_connections, the scheduler's pool), "+
			"or put PgBouncer in front (see the production database guide). ", ue.Addr)
	case ue.Reached:
		fmt.Fprintf(&b, "The servers at %s answered, but none could be used (read-only, shutting down, or the session was lost). "+
			"Point the connection string at the primary, or list every host with target_session_attrs=read-write. ", ue.Addr)
	default:
		fmt.Fprintf(&b, "Nothing usable answered at %s. Check that host and port (database_url or ipamctl's --database-url, IPAM_DATABASE_URL or "+
			"PGHOST/PGPORT), that PostgreSQL runs and listens there, and that no firewall is in between. ", ue.Addr)
	}
	switch {
	case ue.FirstContact:
		fmt.Fprintf(&b, "Every host refused the connection or could not be found, and no server had answered before, which "+
			"is a wrong host or port, or PostgreSQL not running, far more often than a restart: so the call gave up after %s "+
			"rather than failover_timeout's %s. To ride out a restart from the first contact too, set failover_timeout "+
			"(provider) / --failover-timeout (ipamctl) explicitly.",
			ipam.FormatDuration(ue.Waited.Round(time.Second)), ipam.FormatDuration(ue.Bound))
	case ue.Waited > 0:
		fmt.Fprintf(&b, "The call waited %s for a usable server (failover_timeout %s): a switchover or restart that "+
			"takes longer needs a larger failover_timeout (provider) / --failover-timeout (ipamctl).",
			ipam.FormatDuration(ue.Waited.Round(time.Second)), ipam.FormatDuration(ue.Bound))
	default:
		b.WriteString("The call did not wait (failover_timeout is off, or an earlier call of this run already waited it out in vain).")
	}
	return b.String()
}

// busy names the session that holds the lock, when the error does.
func busy(err error) string {
	holder := ""
	var be *ipam.BusyError
	if errors.As(err, &be) {
		if _, h, ok := strings.Cut(be.What, "held: "); ok {
			holder = h
		}
	}
	who := "Another session held a lock past lock_timeout; nothing was written."
	if holder != "" {
		who = "Another session held a lock past lock_timeout; nothing was written. The holder: " + holder + "."
	}
	return who + " Wait for it to finish (a migration, another apply, an operator's VACUUM FULL or LOCK TABLE) and try " +
		"again; if it is stuck, find it in pg_stat_activity and pg_locks and end it (pg_terminate_backend). " +
		"lock_timeout (provider) / --lock-timeout (ipamctl) sets how long to wait."
}

// poolSizing is how to size PgBouncer for the IPAM's connections. Why a
// call waits in its queue (session pooling) the error's own text says.
const poolSizing = "size default_pool_size for every client connection open at once: max_connections and 1 for each " +
	"provider process running at once, 1 for each ipamctl, and the Go API's pool and 1 (the production database guide)."
