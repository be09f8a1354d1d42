package provider

import (
	"context"
	"os"
	"runtime/debug"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"

	"github.com/overlayipam/terraform-provider-ipam/ipam"
)

// NewServer returns the factory of the provider's protocol 6 server: the
// plugin framework's server for New(version), behind contextGuard. main and
// the acceptance tests both serve it.
func NewServer(version string) func() (tfprotov6.ProviderServer, error) {
	return func() (tfprotov6.ProviderServer, error) {
		p := New(version)()
		inner, err := providerserver.NewProtocol6WithError(p)()
		if err != nil {
			return nil, err
		}
		g := guardContexts(inner)
		g.waits = p.(*ipamProvider).waits
		return g, nil
	}
}

// ProcessDefaults sets what the provider's process runs with, before it
// serves: quietSDKLogs and gcPercent. main calls it, and so does the
// benchmark's do-nothing provider, so that both pay the same for logging and
// garbage collection.
func ProcessDefaults() {
	quietSDKLogs()
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(gcPercent)
	}
}

// gcPercent is the garbage collector's target (GOGC) unless GOGC is set: a
// collection when the heap has grown by four times what the last one left,
// not by as much again (Go's default, 100). Terraform starts a provider
// process for one command, contextGuard keeps what the process holds small,
// and the collector's work showed as 13 % of the provider's CPU in an apply
// and a refresh of 500 addresses: with 400 (the provider alone, the two
// settings alternating) a refresh took about a tenth less time and an apply a
// twentieth, for a peak of 64 MiB instead of 42.
const gcPercent = 400

// quietSDKLogs keeps the plugin SDKs' own trace logging (every gRPC call and
// framework step, written as JSON to stderr for terraform to discard) off
// unless someone asked for logs: it costs a quarter of the provider's CPU.
// TF_LOG, or any TF_LOG_SDK* variable, turns it back on as usual.
func quietSDKLogs() {
	if os.Getenv("TF_LOG") != "" || os.Getenv("TF_LOG_PROVIDER") != "" {
		return
	}
	for _, v := range []string{"TF_LOG_SDK", "TF_LOG_SDK_PROTO", "TF_LOG_SDK_FRAMEWORK"} {
		if _, set := os.LookupEnv(v); !set {
			_ = os.Setenv(v, "WARN")
		}
	}
}

// releaseEvery is how many requests contextGuard lets through between two
// releases of the framework's request contexts.
const releaseEvery = 256

// contextGuard bounds the provider's memory over a long run.
//
// The framework's server (terraform-plugin-framework 1.19, internal/
// proto6server) keeps the cancel function of every request's context in a
// slice that only StopProvider empties, so that StopProvider can cancel what
// is in flight. Each kept function holds its request's context chain (the
// SDK's loggers and request fields, 30 to 40 KB), so a refresh and plan of
// 5,000 resources held about half a GiB, in any framework provider. Every
// releaseEvery requests the guard waits until no request is in flight, lets
// none start, and calls the framework's StopProvider: it cancels only
// contexts whose requests have returned, and empties the slice. Requests
// hold the read side of mu while they run; the release holds the write side
// for the moment it takes. A list stream registers its context when it
// starts and uses it until terraform has read every result, so no release
// runs while a stream is open. terraform's own StopProvider (an interrupt)
// passes straight through.
type contextGuard struct {
	tfprotov6.ProviderServer
	mu       sync.RWMutex
	requests atomic.Int64
	streams  atomic.Int64
	releases atomic.Int64 // for tests
	// waits are the provider's waits for the database: a plan, apply or
	// read answered after one carries its warning.
	waits *waits
}

// warnWaited appends the warning of a wait for the database, if one was
// reported since the last (see waits), to an answer without an error: the
// warning says that a wait ended in an answer, and an error names the
// failure itself (an unreachable database, with how long it was tried), so
// the wait stays pending for the next answer that succeeds.
func (g *contextGuard) warnWaited(diags []*tfprotov6.Diagnostic) []*tfprotov6.Diagnostic {
	for _, d := range diags {
		if d != nil && d.Severity == tfprotov6.DiagnosticSeverityError {
			return diags
		}
	}
	if summary, detail, ok := g.waits.take(); ok {
		diags = append(diags, &tfprotov6.Diagnostic{Severity: tfprotov6.DiagnosticSeverityWarning, Summary: summary, Detail: detail})
	}
	return diags
}

func guardContexts(inner tfprotov6.ProviderServer) *contextGuard {
	return &contextGuard{ProviderServer: inner}
}

// guarded runs one unary request under the guard.
func guarded[Req, Resp any](g *contextGuard, ctx context.Context, req Req, call func(context.Context, Req) (Resp, error)) (Resp, error) {
	g.mu.RLock()
	resp, err := call(ctx, req)
	g.mu.RUnlock()
	if g.requests.Add(1)%releaseEvery == 0 {
		go g.release()
	}
	return resp, err
}

func (g *contextGuard) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.streams.Load() > 0 {
		return // a later request tries again
	}
	// The framework's StopProvider: the guard does not override it.
	_, _ = g.StopProvider(context.Background(), &tfprotov6.StopProviderRequest{})
	g.releases.Add(1)
}

// planning marks the context of a refresh, a plan, a data source's read or
// a list: the writes they make (plan-time holds, a refresh's record, the
// marks for a replacement or a confirmation) are ones the command can do
// without, so that a read-only server (a standby, or a primary being demoted)
// refuses them at once instead of making each wait failover_timeout
// (ipam.WritesOptional). An apply's writes still ride out a failover.
func planning(ctx context.Context) context.Context { return ipam.WritesOptional(ctx) }

func (g *contextGuard) GetMetadata(ctx context.Context, req *tfprotov6.GetMetadataRequest) (*tfprotov6.GetMetadataResponse, error) {
	return guarded(g, ctx, req, g.ProviderServer.GetMetadata)
}

func (g *contextGuard) GetProviderSchema(ctx context.Context, req *tfprotov6.GetProviderSchemaRequest) (*tfprotov6.GetProviderSchemaResponse, error) {
	return guarded(g, ctx, req, g.ProviderServer.GetProviderSchema)
}

func (g *contextGuard) GetResourceIdentitySchemas(ctx context.Context, req *tfprotov6.GetResourceIdentitySchemasRequest) (*tfprotov6.GetResourceIdentitySchemasResponse, error) {
	return guarded(g, ctx, req, g.ProviderServer.GetResourceIdentitySchemas)
}

func (g *contextGuard) ValidateProviderConfig(ctx context.Context, req *tfprotov6.ValidateProviderConfigRequest) (*tfprotov6.ValidateProviderConfigResponse, error) {
	return guarded(g, ctx, req, g.ProviderServer.ValidateProviderConfig)
}

func (g *contextGuard) ConfigureProvider(ctx context.Context, req *tfprotov6.ConfigureProviderRequest) (*tfprotov6.ConfigureProviderResponse, error) {
	return guarded(g, ctx, req, g.ProviderServer.ConfigureProvider)
}

func (g *contextGuard) ValidateResourceConfig(ctx context.Context, req *tfprotov6.ValidateResourceConfigRequest) (*tfprotov6.ValidateResourceConfigResponse, error) {
	return guarded(g, ctx, req, g.ProviderServer.ValidateResourceConfig)
}

func (g *contextGuard) UpgradeResourceState(ctx context.Context, req *tfprotov6.UpgradeResourceStateRequest) (*tfprotov6.UpgradeResourceStateResponse, error) {
	return guarded(g, ctx, req, g.ProviderServer.UpgradeResourceState)
}

func (g *contextGuard) ReadResource(ctx context.Context, req *tfprotov6.ReadResourceRequest) (*tfprotov6.ReadResourceResponse, error) {
	resp, err := guarded(g, planning(ctx), req, g.ProviderServer.ReadResource)
	if resp != nil {
		resp.Diagnostics = g.warnWaited(resp.Diagnostics)
	}
	return resp, err
}

func (g *contextGuard) PlanResourceChange(ctx context.Context, req *tfprotov6.PlanResourceChangeRequest) (*tfprotov6.PlanResourceChangeResponse, error) {
	resp, err := guarded(g, planning(ctx), req, g.ProviderServer.PlanResourceChange)
	if resp != nil {
		resp.Diagnostics = g.warnWaited(resp.Diagnostics)
	}
	return resp, err
}

func (g *contextGuard) ApplyResourceChange(ctx context.Context, req *tfprotov6.ApplyResourceChangeRequest) (*tfprotov6.ApplyResourceChangeResponse, error) {
	resp, err := guarded(g, ctx, req, g.ProviderServer.ApplyResourceChange)
	if resp != nil {
		resp.Diagnostics = g.warnWaited(resp.Diagnostics)
	}
	return resp, err
}

func (g *contextGuard) ImportResourceState(ctx context.Context, req *tfprotov6.ImportResourceStateRequest) (*tfprotov6.ImportResourceStateResponse, error) {
	return guarded(g, ctx, req, g.ProviderServer.ImportResourceState)
}

func (g *contextGuard) MoveResourceState(ctx context.Context, req *tfprotov6.MoveResourceStateRequest) (*tfprotov6.MoveResourceStateResponse, error) {
	return guarded(g, ctx, req, g.ProviderServer.MoveResourceState)
}

func (g *contextGuard) UpgradeResourceIdentity(ctx context.Context, req *tfprotov6.UpgradeResourceIdentityRequest) (*tfprotov6.UpgradeResourceIdentityResponse, error) {
	return guarded(g, ctx, req, g.ProviderServer.UpgradeResourceIdentity)
}

func (g *contextGuard) GenerateResourceConfig(ctx context.Context, req *tfprotov6.GenerateResourceConfigRequest) (*tfprotov6.GenerateResourceConfigResponse, error) {
	return guarded(g, ctx, req, g.ProviderServer.GenerateResourceConfig)
}

func (g *contextGuard) ValidateDataResourceConfig(ctx context.Context, req *tfprotov6.ValidateDataResourceConfigRequest) (*tfprotov6.ValidateDataResourceConfigResponse, error) {
	return guarded(g, ctx, req, g.ProviderServer.ValidateDataResourceConfig)
}

func (g *contextGuard) ReadDataSource(ctx context.Context, req *tfprotov6.ReadDataSourceRequest) (*tfprotov6.ReadDataSourceResponse, error) {
	resp, err := guarded(g, planning(ctx), req, g.ProviderServer.ReadDataSource)
	if resp != nil {
		resp.Diagnostics = g.warnWaited(resp.Diagnostics)
	}
	return resp, err
}

func (g *contextGuard) GetFunctions(ctx context.Context, req *tfprotov6.GetFunctionsRequest) (*tfprotov6.GetFunctionsResponse, error) {
	return guarded(g, ctx, req, g.ProviderServer.GetFunctions)
}

func (g *contextGuard) CallFunction(ctx context.Context, req *tfprotov6.CallFunctionRequest) (*tfprotov6.CallFunctionResponse, error) {
	return guarded(g, ctx, req, g.ProviderServer.CallFunction)
}

// The list resources are an optional interface of the protocol server,
// which terraform-plugin-go finds by type assertion: the guard passes it on.
var _ tfprotov6.ListResourceServer = (*contextGuard)(nil)

func (g *contextGuard) ValidateListResourceConfig(ctx context.Context, req *tfprotov6.ValidateListResourceConfigRequest) (*tfprotov6.ValidateListResourceConfigResponse, error) {
	return guarded(g, ctx, req, g.ProviderServer.(tfprotov6.ListResourceServer).ValidateListResourceConfig)
}

// ListResource counts its stream as open from the moment it registers its
// context until terraform has read the last result (or stopped reading). A
// stream never read keeps the releases off: memory, never a canceled list.
func (g *contextGuard) ListResource(ctx context.Context, req *tfprotov6.ListResourceRequest) (*tfprotov6.ListResourceServerStream, error) {
	g.streams.Add(1)
	stream, err := guarded(g, planning(ctx), req, g.ProviderServer.(tfprotov6.ListResourceServer).ListResource)
	if err != nil || stream == nil || stream.Results == nil {
		g.streams.Add(-1)
		return stream, err
	}
	results := stream.Results
	var once sync.Once
	stream.Results = func(yield func(tfprotov6.ListResourceResult) bool) {
		defer once.Do(func() { g.streams.Add(-1) })
		results(yield)
	}
	return stream, nil
}

// configured are the clients the provider's process configured, closed
// when Terraform ends the process (CloseClients).
var configured clients

type clients struct {
	mu   sync.Mutex
	open []*ipam.Client
}

func (c *clients) add(st *ipam.Client) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.open = append(c.open, st)
}

// CloseClients closes every client the provider configured. main calls it
// once Terraform has shut the provider's server down: each connection then
// ends with the protocol's goodbye instead of a dropped socket, which a
// pooler logs as an error ("client unexpected eof") and a server may count
// as a broken connection.
func CloseClients() {
	configured.mu.Lock()
	open := configured.open
	configured.open = nil
	configured.mu.Unlock()
	for _, st := range open {
		st.Close()
	}
}
