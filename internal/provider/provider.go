// Package provider is the Terraform face of the IPAM: schemas, plan modifiers,
// diagnostics and import. Each resource translates between a Terraform model
// and one call of the ipam package; there is no SQL here.
package provider

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/function"
	"github.com/hashicorp/terraform-plugin-framework/list"
	"github.com/hashicorp/terraform-plugin-framework/provider"
	"github.com/hashicorp/terraform-plugin-framework/provider/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/overlayipam/terraform-provider-ipam/ipam"
)

var (
	_ provider.Provider                  = &ipamProvider{}
	_ provider.ProviderWithFunctions     = &ipamProvider{}
	_ provider.ProviderWithListResources = &ipamProvider{}
)

// EnvDatabaseURL is read when the provider's database_url is not set.
const EnvDatabaseURL = "IPAM_DATABASE_URL"

// EnvOrigin is read when the provider's origin is not set.
const EnvOrigin = "IPAM_ORIGIN"

type ipamProvider struct {
	version string
	// waits gathers the waits for the database of this provider process
	// (see waits); the server's guard warns of them.
	waits *waits
}

type ipamProviderModel struct {
	DatabaseURL    types.String `tfsdk:"database_url"`
	MaxConnections types.Int64  `tfsdk:"max_connections"`
	AutoMigrate    types.Bool   `tfsdk:"auto_migrate"`
	ConnectTimeout types.String `tfsdk:"connect_timeout"`
	LockTimeout    types.String `tfsdk:"lock_timeout"`
	StmtTimeout    types.String `tfsdk:"statement_timeout"`
	FailoverTime   types.String `tfsdk:"failover_timeout"`
	Actor          types.String `tfsdk:"actor"`
	Origin         types.String `tfsdk:"origin"`
	Reservations   types.Bool   `tfsdk:"plan_reservations"`
	ReservationTTL types.String `tfsdk:"reservation_ttl"`
}

// New returns the provider factory for a version (set by the release build).
func New(version string) func() provider.Provider {
	return func() provider.Provider { return &ipamProvider{version: version, waits: &waits{}} }
}

func (p *ipamProvider) Metadata(_ context.Context, _ provider.MetadataRequest, resp *provider.MetadataResponse) {
	resp.TypeName = "ipam"
	resp.Version = p.version
}

func (p *ipamProvider) Schema(_ context.Context, _ provider.SchemaRequest, resp *provider.SchemaResponse) {
	resp.Schema = schema.Schema{
		MarkdownDescription: "The IPAM provider is the IP address manager of an IPv6-first microVM platform: " +
			"it allocates node overlay addresses, instance addresses and IPv4 add-on addresses from pools kept in " +
			"PostgreSQL, with a transactional allocator, cooldown before reuse and an audit trail.",
		Attributes: map[string]schema.Attribute{
			"database_url": schema.StringAttribute{
				MarkdownDescription: "PostgreSQL connection string (URL or keyword/value form). Defaults to the `IPAM_DATABASE_URL` " +
					"environment variable, then to the standard `PGHOST`, `PGPORT`, `PGUSER`, `PGPASSWORD`, `PGDATABASE` variables. " +
					"Several hosts with `target_session_attrs=read-write` give failover. Sensitive: never logged or stored in state.",
				Optional:  true,
				Sensitive: true,
			},
			"max_connections": schema.Int64Attribute{
				MarkdownDescription: "Most connections the provider opens to the database (default `4`). Resources beyond it queue; they do not fail.",
				Optional:            true,
				Validators:          []validator.Int64{int64validator.Between(1, 1000)},
			},
			"auto_migrate": schema.BoolAttribute{
				MarkdownDescription: "Apply the embedded schema migrations when the provider starts (default `true`). Several providers " +
					"starting at once are serialized. Set `false` when the provider's role may not change the schema; the schema " +
					"must then be exactly the version this provider needs (`ipamctl migrate up`).",
				Optional: true,
			},
			"connect_timeout": schema.StringAttribute{
				MarkdownDescription: "How long one connection attempt may take, e.g. `\"10s\"` (default).",
				Optional:            true,
				Validators:          []validator.String{validDuration(time.Second)},
			},
			"lock_timeout": schema.StringAttribute{
				MarkdownDescription: "How long one operation may wait for a lock another database session holds (default `\"30s\"`; " +
					"`\"0s\"`: no bound). Past it the operation fails with `ipam_busy`, names the lock and its holder when PostgreSQL " +
					"shows them, and writes nothing.",
				Optional:   true,
				Validators: []validator.String{validDuration(0)},
			},
			"statement_timeout": schema.StringAttribute{
				MarkdownDescription: "How long one statement may run (default `\"120s\"`; `\"0s\"`: no bound). Past it the statement is " +
					"canceled and the operation fails with `ipam_timeout`, writing nothing.",
				Optional:   true,
				Validators: []validator.String{validDuration(0)},
			},
			"failover_timeout": schema.StringAttribute{
				MarkdownDescription: "How long an operation rides out a database with no usable server, as during a switchover " +
					"or failover (connections refused or lost, a read-only server, sessions terminated), retrying with backoff " +
					"(default `\"30s\"`; `\"0s\"`: fail at once). Past it the operation fails with `ipam_unavailable`, naming " +
					"each host tried and what it answered. Give `database_url` every member with " +
					"`target_session_attrs=read-write` so that a retry finds the new primary. Left unset, a first contact " +
					"that finds nothing there (every host refuses the connection or does not resolve, and no server has " +
					"answered yet: a wrong host or port, or PostgreSQL not running) gives up after `5s`, since Terraform " +
					"shows nothing while a provider waits; set it to wait the whole bound then too. A plan or a refresh " +
					"does not wait for a read-only server: what it writes (plan-time holds, a refresh's record) it goes " +
					"without, with a warning.",
				Optional:   true,
				Validators: []validator.String{validDuration(0)},
			},
			"actor": schema.StringAttribute{
				MarkdownDescription: "Who allocates: recorded with every allocation and event (default `terraform`). An owner's " +
					"address allocated by one actor is adopted by the same actor on a retried apply and refused to another with `owner_conflict`.",
				Optional:   true,
				Validators: []validator.String{validID("actor")},
			},
			"origin": schema.StringAttribute{
				MarkdownDescription: "Which configuration this is, recorded with every address it creates (default: `IPAM_ORIGIN`, " +
					"else the working directory). A create that finds its owner's address made by an apply that never finished " +
					"(killed before its state was saved) adopts it only from the same `actor` and origin; from another origin it " +
					"fails with `owner_conflict`, since that is a second configuration declaring the owner. Set it when one " +
					"configuration runs in changing directories (a CI job with a new checkout path each time). In a workspace other " +
					"than `default` the working directory's origin names the workspace too, since each workspace has a state of " +
					"its own; an origin that is set should name it as well (`\"ci-${terraform.workspace}\"`).",
				Optional:   true,
				Validators: []validator.String{validOrigin()},
			},
			"plan_reservations": schema.BoolAttribute{
				MarkdownDescription: "Show the real address in the plan (default `true`): planning a new address resource takes, or finds " +
					"again, a short-lived hold for its owner, and apply turns that hold into the allocation, so the applied address " +
					"always equals the planned one. When `false`, when the database role may not write, or when an owner key is " +
					"unknown at plan time, the address is \"known after apply\" and a warning says why.",
				Optional: true,
			},
			"reservation_ttl": schema.StringAttribute{
				MarkdownDescription: "How long a plan-time hold lasts (default `\"1h\"`). A hold not applied within it returns its " +
					"address to the pool without cooldown; applying a plan after that still gets the planned address if it is " +
					"free, and fails with a clear message to plan again if someone else took it.",
				Optional:   true,
				Validators: []validator.String{validDuration(time.Second)},
			},
		},
	}
}

func (p *ipamProvider) Configure(ctx context.Context, req provider.ConfigureRequest, resp *provider.ConfigureResponse) {
	var m ipamProviderModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if m.DatabaseURL.IsUnknown() {
		resp.Diagnostics.AddWarning("Database Not Yet Known",
			"database_url depends on values known only after apply; the IPAM provider cannot plan its resources until then.")
		return
	}
	cfg := ipam.Config{DatabaseURL: m.DatabaseURL.ValueString(), Actor: m.Actor.ValueString(), PlanRun: currentRun().id,
		Origin: configOrigin(m.Origin)}
	if cfg.DatabaseURL == "" {
		cfg.DatabaseURL = os.Getenv(EnvDatabaseURL)
	}
	if !m.MaxConnections.IsNull() {
		cfg.MaxConnections = int32(m.MaxConnections.ValueInt64())
	}
	if !m.ConnectTimeout.IsNull() {
		cfg.ConnectTimeout, _ = ipam.ParseDuration(m.ConnectTimeout.ValueString())
	}
	cfg.LockTimeout = waitBound(m.LockTimeout)
	cfg.StatementTimeout = waitBound(m.StmtTimeout)
	cfg.FailoverTimeout = waitBound(m.FailoverTime)
	if cfg.FailoverTimeout == 0 && currentRun().applies {
		// An apply's walk follows a plan that reached the database: a first
		// contact that finds nothing there is a restart, waited in full.
		cfg.FailoverTimeout = ipam.DefaultFailoverTimeout
	}
	waited := p.waits
	if waited == nil {
		waited = &waits{}
	}
	cfg.OnWait = waited.report
	st, err := ipam.Open(ctx, cfg)
	if err != nil {
		addCoreError(&resp.Diagnostics, "Unable to Configure the IPAM Provider", err)
		return
	}
	tflog.Info(ctx, "IPAM provider configured", map[string]any{"version": p.version, "database": st.Addr(), "actor": st.Actor()})
	if m.AutoMigrate.IsNull() || m.AutoMigrate.ValueBool() {
		status, err := st.Migrate(ctx)
		if err != nil {
			st.Close()
			addCoreError(&resp.Diagnostics, "Unable to Migrate the IPAM Database", err)
			return
		}
		tflog.Debug(ctx, "IPAM schema ready", map[string]any{"schema_version": status.Current})
		if status.Found > 0 && status.Applied > 0 {
			// An upgrade of a schema in use (not a new database's first
			// tables): every other configuration and ipamctl on it feel it.
			resp.Diagnostics.AddWarning("IPAM Database Schema Upgraded", fmt.Sprintf("This run upgraded the IPAM database's "+
				"schema from version %d to %d (auto_migrate = true). A provider or ipamctl of an earlier release now refuses "+
				"to run against this database until it is upgraded too. On a database several configurations share, pin the "+
				"provider's version in each and let the schema's owner migrate (auto_migrate = false, ipamctl migrate up): "+
				"see the guide \"Upgrading the provider\".", status.Found, status.Current))
		}
	} else if err := st.CheckSchema(ctx); err != nil {
		st.Close()
		addCoreError(&resp.Diagnostics, "Unable to Configure the IPAM Provider", err)
		return
	}
	waited.warn(&resp.Diagnostics)
	configured.add(st)
	pd := &providerData{store: st, reservations: m.Reservations.IsNull() || m.Reservations.ValueBool(), reservationTTL: time.Hour}
	switch {
	case m.Origin.IsUnknown():
		pd.unknownWho = "origin"
	case m.Actor.IsUnknown():
		pd.unknownWho = "actor"
	}
	if !m.ReservationTTL.IsNull() {
		pd.reservationTTL, _ = ipam.ParseDuration(m.ReservationTTL.ValueString())
	}
	resp.ResourceData = pd
	resp.ListResourceData = pd
	resp.DataSourceData = pd
}

func (p *ipamProvider) Resources(context.Context) []func() resource.Resource {
	return []func() resource.Resource{
		NewClusterResource,
		NewNodeAddressResource,
		NewInstanceAddressResource,
		NewPoolResource,
		NewEnvIPv4Resource,
		NewAddressSetResource,
		NewNodeInstanceBlocksResource,
	}
}

func (p *ipamProvider) DataSources(context.Context) []func() datasource.DataSource {
	return []func() datasource.DataSource{
		NewClusterDataSource,
		NewPoolUsageDataSource,
		NewAllocationsDataSource,
		NewAddressDataSource,
		NewNodeInstanceBlocksDataSource,
	}
}

func (p *ipamProvider) Functions(context.Context) []func() function.Function { return functions() }

// ListResources are the list resources of `terraform query` (Terraform 1.14+).
func (p *ipamProvider) ListResources(context.Context) []func() list.ListResource {
	return listResources()
}

// waitBound reads a lock, statement or failover timeout: unset is the core's default
// (0), "0s" is no bound (negative for the core).
func waitBound(v types.String) time.Duration {
	if v.IsNull() || v.IsUnknown() {
		return 0
	}
	d, _ := ipam.ParseDuration(v.ValueString())
	if d == 0 {
		return -1
	}
	return d
}

// waits logs each report of a wait for the database at INFO, and keeps the
// longest not yet warned of, so that a plan or apply that waited says so in
// a warning (at configure, or on the next answer of a plan, apply or read:
// see contextGuard): no wait is silent.
type waits struct {
	mu      sync.Mutex
	pending ipam.Wait
}

func (w *waits) report(ctx context.Context, wait ipam.Wait) {
	bound := "failover_timeout_seconds"
	switch {
	case wait.Lock:
		bound = "lock_timeout_seconds"
	case wait.Stalled:
		bound = "statement_timeout_seconds"
	}
	tflog.Info(ctx, "IPAM: "+wait.String(), map[string]any{"database": wait.Addr,
		"waited_seconds": int(wait.Waited.Seconds()), bound: int(wait.Bound.Seconds())})
	w.mu.Lock()
	defer w.mu.Unlock()
	if wait.Waited > w.pending.Waited {
		w.pending = wait
	}
}

// take returns the summary and detail of the warning of the longest wait
// reported since the last one taken; ok is false when there was none.
func (w *waits) take() (summary, detail string, ok bool) {
	if w == nil {
		return "", "", false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.pending.Waited == 0 {
		return "", "", false
	}
	longest := w.pending
	w.pending = ipam.Wait{}
	if longest.Lock {
		return "Waited for a Lock in the IPAM Database",
			fmt.Sprintf("The provider waited at least %s for a lock that another session of the database at %s held (%s). "+
				"Another plan or apply, the scheduler, or an operator's command or transaction held it: each statement waits "+
				"up to lock_timeout for each lock it meets, and a session left idle in its transaction holds its locks until "+
				"it ends.",
				ipam.FormatDuration(longest.Waited.Truncate(time.Second)), longest.Addr, longest.String()), true
	}
	if longest.Stalled {
		return "Waited for the IPAM Database",
			fmt.Sprintf("The provider waited at least %s for an answer of the database at %s (%s). A server that answers "+
				"neither a statement nor a look aside is stopped, overloaded or cut off by the network: check its health.",
				ipam.FormatDuration(longest.Waited.Truncate(time.Second)), longest.Addr, longest.String()), true
	}
	return "Waited for the IPAM Database",
		fmt.Sprintf("The provider waited at least %s for a usable server at %s (%s). A switchover or restart explains "+
			"a short wait; a database that is often this slow to answer makes every plan wait: check its health, or the "+
			"host list of the connection string.",
			ipam.FormatDuration(longest.Waited.Truncate(time.Second)), longest.Addr, longest.String()), true
}

// warn adds the warning of a wait, if one was reported.
func (w *waits) warn(diags *diag.Diagnostics) {
	if summary, detail, ok := w.take(); ok {
		diags.AddWarning(summary, detail)
	}
}

// configOrigin is the provider's origin: the option, else IPAM_ORIGIN, else
// the working directory (Terraform starts the provider in the directory of
// the configuration, after -chdir), with its workspace unless that is
// "default": each workspace has a state of its own, so it is another
// configuration to the provider.
func configOrigin(v types.String) string {
	if o := v.ValueString(); o != "" {
		return o
	}
	if o := os.Getenv(EnvOrigin); o != "" {
		return o
	}
	if wd, err := os.Getwd(); err == nil {
		if ws := currentWorkspace(wd); ws != "default" {
			return wd + " (workspace " + ws + ")"
		}
		return wd
	}
	return ""
}

// currentWorkspace is the Terraform (or OpenTofu) workspace of the
// configuration in wd, as the CLI itself finds it: TF_WORKSPACE, else what
// `terraform workspace select` recorded in the data directory (TF_DATA_DIR,
// default .terraform), else "default".
func currentWorkspace(wd string) string {
	if ws := os.Getenv("TF_WORKSPACE"); ws != "" {
		return ws
	}
	dir := os.Getenv("TF_DATA_DIR")
	if dir == "" {
		dir = ".terraform"
	}
	if !filepath.IsAbs(dir) {
		dir = filepath.Join(wd, dir)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "environment")); err == nil {
		if ws := strings.TrimSpace(string(b)); ws != "" {
			return ws
		}
	}
	return "default"
}
