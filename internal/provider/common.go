package provider

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/overlayipam/terraform-provider-ipam/internal/advice"
	"github.com/overlayipam/terraform-provider-ipam/ipam"
	"github.com/overlayipam/terraform-provider-ipam/ipam/operator"
)

// replacementMarkTTL is the least time a replacement's mark lasts
// (MarkReplacement and its kin): a saved plan of a create_before_destroy
// replacement applied later than reservation_ttl must still find it, or
// Terraform's re-plan at apply shows the address unknown, fails with
// "Provider produced inconsistent final plan", and leaves the old object
// deposed in the state, which no later apply could replace.
const replacementMarkTTL = 7 * 24 * time.Hour

// markTTL is how long a replacement's mark lasts: reservation_ttl, and at
// least replacementMarkTTL. A mark is this configuration's alone, and ends
// when anything changes the allocation.
func (pd *providerData) markTTL() time.Duration { return max(pd.reservationTTL, replacementMarkTTL) }

// providerData is what Configure hands to resources and data sources: the
// core store and the provider-wide options.
type providerData struct {
	store        *ipam.Client
	reservations bool
	// unknownWho names the provider setting that says who this
	// configuration is (origin, actor) when its value is known only after
	// apply: a hold is its configuration's, so none is taken then.
	unknownWho     string
	reservationTTL time.Duration
	// warned remembers the warnings already given, so each reason for an
	// unknown planned address is said once per run, not once per resource.
	warned sync.Map
	// clusters caches clusters for the life of this provider process (one
	// terraform command): instances read their WorkloadSpec network settings
	// from their cluster, and a refresh of hundreds of instances need not
	// read the same cluster hundreds of times.
	clusters sync.Map
	// instancePools caches, for plans, the pool an instance on a node
	// draws from (see instancePool).
	instancePools instancePoolCache
	// newBlocks holds the nodes ([2]string{cluster, node}) whose instance
	// blocks this plan creates (plannedNewBlocks).
	newBlocks sync.Map
	// holdsTaken counts, by pool id, the plan-time holds this run took or
	// found again (*atomic.Int64), so that a pool found full can say
	// whether this plan's own holds fill it (exhaustedAtPlan).
	holdsTaken sync.Map
	// plannedPools holds the blocks of each operator pool this run plans
	// to create or change (pool id -> []netip.Prefix), so that two pools of
	// one plan whose blocks overlap fail the plan (plannedOverlap), as the
	// second one's apply would.
	plannedPools sync.Map
}

// plannedOverlap records the planned blocks of pool id (of cluster) and
// says which other pool this run plans overlaps them ("" when none): the
// pool id, its block and the block of id it overlaps.
func (pd *providerData) plannedOverlap(cluster, id string, cidrs []netip.Prefix) (other string, theirs, ours netip.Prefix) {
	pd.plannedPools.Store(id, cidrs)
	pd.plannedPools.Range(func(k, v any) bool {
		if k.(string) == id || !strings.HasPrefix(k.(string), cluster+"/") {
			return true
		}
		for _, t := range v.([]netip.Prefix) {
			for _, o := range cidrs {
				if t.Overlaps(o) {
					other, theirs, ours = k.(string), t, o
					return false
				}
			}
		}
		return true
	})
	return other, theirs, ours
}

// tookHold records a plan-time hold this run holds in pool poolID.
func (pd *providerData) tookHold(poolID string) {
	n, _ := pd.holdsTaken.LoadOrStore(poolID, new(atomic.Int64))
	n.(*atomic.Int64).Add(1)
}

// holdsIn is how many plan-time holds this run holds in the pools of ids
// (an ExhaustedError's PoolID: one id, or several joined by ", ").
func (pd *providerData) holdsIn(ids string) int64 {
	var sum int64
	for _, id := range strings.Split(ids, ", ") {
		if n, ok := pd.holdsTaken.Load(id); ok {
			sum += n.(*atomic.Int64).Load()
		}
	}
	return sum
}

// planNewBlocks records, in the plan of an ipam_node_instance_blocks create,
// that node's blocks come with this apply.
func (pd *providerData) planNewBlocks(clusterID, node string) {
	if pd != nil {
		pd.newBlocks.Store([2]string{clusterID, node}, true)
	}
}

// plannedNewBlocks reports whether an instance on node must wait for the
// node's blocks that this same apply creates: this plan creates them
// (planNewBlocks: Terraform plans the blocks first when the instance takes
// its node_id from them) and the node has none yet. Its address is then
// allocated inside them at apply; a hold taken now would be in the cluster's
// instance pool, outside them.
func (pd *providerData) plannedNewBlocks(ctx context.Context, clusterID, node string) bool {
	if _, ok := pd.newBlocks.Load([2]string{clusterID, node}); !ok {
		return false
	}
	id, err := pd.instancePool(ctx, clusterID, node)
	return err == nil && id == ipam.InstancePool(clusterID).ID()
}

// instancePoolCache holds, per cluster and node, the pool an instance on
// that node draws from: the node's blocks or the cluster's instance pool.
// Every instance with a node_id asks at every plan, and a refresh plan of
// hundreds of instances on a few nodes need not ask the database hundreds
// of times. Only plans read it. A write of this process that can change
// the answer (a node's blocks created, rescaled or released, a cluster
// destroyed) empties it, and an answer read while such a write ran is not
// kept (gen). A change made by another process meanwhile shows at the next
// plan, as it would if the plan had read it a moment earlier.
type instancePoolCache struct {
	mu  sync.Mutex
	gen uint64
	ids map[[2]string]string
}

// instancePool names the pool an instance on node draws from (plans only).
func (pd *providerData) instancePool(ctx context.Context, clusterID, node string) (string, error) {
	c := &pd.instancePools
	key := [2]string{clusterID, node}
	c.mu.Lock()
	id, ok := c.ids[key]
	gen := c.gen
	c.mu.Unlock()
	if ok {
		return id, nil
	}
	id, err := pd.store.InstancePoolID(ctx, clusterID, node)
	if err == nil {
		c.mu.Lock()
		if c.gen == gen {
			if c.ids == nil {
				c.ids = map[[2]string]string{}
			}
			c.ids[key] = id
		}
		c.mu.Unlock()
	}
	return id, err
}

// forgetInstancePools empties the cache after a write that can change
// which pool a node's instances draw from.
func (pd *providerData) forgetInstancePools() {
	if pd == nil {
		return
	}
	c := &pd.instancePools
	c.mu.Lock()
	c.gen++
	clear(c.ids)
	c.mu.Unlock()
}

// cluster reads a cluster, once per provider process; fresh reads it from the
// database whatever the cache holds (an apply writes what the cluster's
// settings are now, which an earlier step of the same apply may have changed).
func (pd *providerData) cluster(ctx context.Context, id string, fresh bool) (ipam.Cluster, error) {
	if c, ok := pd.clusters.Load(id); ok && !fresh {
		return c.(ipam.Cluster), nil
	}
	c, err := pd.store.GetCluster(ctx, id)
	if err == nil {
		pd.clusters.Store(id, c)
	}
	return c, err
}

// forgetCluster drops a cluster from the cache after a write to it.
func (pd *providerData) forgetCluster(id string) {
	if pd != nil {
		pd.clusters.Delete(id)
	}
}

// warnOnce adds a warning the first time a reason comes up.
func (pd *providerData) warnOnce(diags *diag.Diagnostics, reason, summary, detail string) {
	if _, seen := pd.warned.LoadOrStore(reason, true); !seen {
		diags.AddWarning(summary, detail)
	}
}

// storeFrom fetches the core store handed over by Configure.
func storeFrom(data any, diags *diag.Diagnostics) *ipam.Client {
	if pd := providerDataFrom(data, diags); pd != nil {
		return pd.store
	}
	return nil
}

func providerDataFrom(data any, diags *diag.Diagnostics) *providerData {
	if data == nil {
		return nil
	}
	pd, ok := data.(*providerData)
	if !ok {
		diags.AddError("Unexpected Provider Data", fmt.Sprintf("expected *providerData, got %T; please report this issue", data))
		return nil
	}
	return pd
}

func requireStore(st *ipam.Client, diags *diag.Diagnostics) bool {
	if st == nil {
		diags.AddError("IPAM Provider Not Configured",
			"The provider has no database connection yet (database_url was unknown at plan time). Apply its dependencies first.")
		return false
	}
	return true
}

// addCoreError turns a core error into a diagnostic: bad input is attached to
// the attribute it names. Everything else is titled for its class (package
// advice, the one source ipamctl shares): a failure to use the database at
// all by the class alone ("IPAM Database Unreachable", not the operation that
// never ran), any other by the operation and the class. The detail says what
// the failure left behind and what to do, then the error, code first.
func addCoreError(diags *diag.Diagnostics, summary string, err error) {
	if errs := problems(err); len(errs) > 1 {
		// Several problems, each named: one diagnostic each.
		for _, e := range errs {
			addCoreError(diags, summary, e)
		}
		return
	}
	var ie *ipam.InvalidError
	if errors.As(err, &ie) && ie.Field != "" {
		at := path.Root(ie.Field)
		if ie.Indexed {
			at = at.AtListIndex(ie.Index) // the element at fault: Terraform quotes it, not the whole list
		}
		diags.AddAttributeError(at, summary, ie.Msg)
		return
	}
	diags.AddError(coreErrorText(summary, err))
}

// problems are the errors the core joined into err (it names every problem
// of an input, not only the first), or err alone.
func problems(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// DiagnosticText is the summary and detail of the diagnostic the provider
// shows for the core's error err under summary ("Unable to Allocate Node
// Address"), as addCoreError adds it: the documentation's tests check the
// guides' error samples against it.
func DiagnosticText(summary string, err error) (string, string) { return coreErrorText(summary, err) }

// uncheckedAtPlan warns, on attribute at, that a plan-time check of what
// (a sentence's subject: "the pool's blocks") could not run because the
// database could not be used (err: unreachable, refused, busy, timed out,
// read-only, a missing grant): the plan shows the change unchecked, and the
// apply checks it again. Other errors (a pool this apply creates, say) are
// the apply's to judge, and say nothing here.
func uncheckedAtPlan(diags *diag.Diagnostics, at path.Path, what string, err error) {
	if err == nil || !advice.For(err).Connection {
		return
	}
	diags.AddAttributeWarning(at, "Not Checked at Plan Time",
		"This plan could not check "+what+" against the IPAM database: "+err.Error()+". The plan shows the change "+
			"unchecked; the apply checks it again, and fails, writing nothing, if the database refuses it.")
}

// judgeNew says at plan, on attribute at, whether the create of a cluster
// or an operator pool (kind "cluster" or "pool", managed its Managers kind,
// id) would be refused because it exists already: the apply's error (import
// it, summary), unless a Terraform state holds it. This configuration's is
// the create of its replacement, which the apply destroys first; one only a
// read saw (an import, maybe this configuration's) is a warning. replaced:
// it exists and the plan goes on, as the create of its replacement.
func judgeNew(ctx context.Context, st *ipam.Client, diags *diag.Diagnostics, at path.Path, kind, managed, id, summary string) (replaced bool) {
	err := st.CheckNew(ctx, kind, id)
	var ce *ipam.ConflictError
	if !errors.As(err, &ce) {
		uncheckedAtPlan(diags, at, "whether the "+kind+" exists already", err)
		return false
	}
	managers, merr := operator.New(st).Managers(ctx, managed, []string{id})
	origin, held := managers[id]
	switch {
	case merr != nil:
		uncheckedAtPlan(diags, at, "whether the "+kind+" exists already", merr)
	case held && origin == st.Origin():
		return true
	case held && origin == "":
		diags.AddAttributeWarning(at, "The "+strings.ToUpper(kind[:1])+kind[1:]+" Exists Already",
			err.Error()+". A Terraform state holds it (a refresh or an import read it): if that state is this "+
				"configuration's and this apply replaces it, the create succeeds; otherwise the apply fails with this error.")
		return true
	default:
		addCoreError(diags, summary, err)
	}
	return false
}

// coreErrorText is the summary and detail of addCoreError.
func coreErrorText(summary string, err error) (string, string) {
	ex := advice.For(err)
	title := summary + ": " + ex.Title
	detail := ex.Advice
	switch {
	case ex.Code == "":
		title = summary
	case ex.Connection:
		title = ex.Title
		if left := leftBehind(summary); left != "" {
			detail = left + "\n\n" + detail
		}
	}
	if hint := importHint(err); hint != "" {
		detail += "\n\n" + hint
	}
	return title, detail + "\n\n" + err.Error()
}

// withHint is importHint(err) after a space, or "".
func withHint(err error) string {
	if h := importHint(err); h != "" {
		return " " + h
	}
	return ""
}

// leftBehind says what a failure to use the database left behind, for the
// operation the summary names.
func leftBehind(summary string) string {
	switch {
	case strings.HasPrefix(summary, "Unable to Allocate"), strings.HasPrefix(summary, "Unable to Reserve"),
		strings.HasPrefix(summary, "Unable to Create"):
		return "No allocation was made. Apply again once the database can be used."
	case strings.HasPrefix(summary, "Unable to Release"), strings.HasPrefix(summary, "Unable to Delete"):
		return "Nothing was released: the address is still held and the resource stays in the state. " +
			"Destroy again once the database can be used."
	case strings.HasPrefix(summary, "Unable to Configure"), strings.HasPrefix(summary, "Unable to Migrate"):
		return "The provider could not start using the IPAM database: nothing was read or written, and its schema was not changed."
	}
	return "Nothing was changed."
}

// privateGeneration is the private state's key for the allocation's
// generation, a bare JSON number. Terraform writes the whole state file after
// every resource an apply changes, so each byte a resource keeps there is
// written about as many times as the state has resources: the key and value
// are kept short (the state file shows them base64-encoded twice).
const privateGeneration = "g"

// privateGenerationV1 is the key earlier builds wrote, with the value
// {"generation":N}: still read, and removed when setGeneration writes.
const privateGenerationV1 = "generation"

type generationJSON struct {
	Generation int64 `json:"generation"`
}

// noPrivate: the request or response carries no private state (nil, or a
// nil pointer in the interface: a list result of terraform query).
func noPrivate(p privateState) bool {
	v := reflect.ValueOf(p)
	return p == nil || (v.Kind() == reflect.Pointer && v.IsNil())
}

// privateState is the subset of the framework's private state API we use.
type privateState interface {
	GetKey(ctx context.Context, key string) ([]byte, diag.Diagnostics)
	SetKey(ctx context.Context, key string, value []byte) diag.Diagnostics
}

// setGeneration keeps the allocation's generation in private state, so that
// delete carries it and a stale release is a no-op.
func setGeneration(ctx context.Context, p privateState, gen int64) diag.Diagnostics {
	if noPrivate(p) {
		return nil // a list result (terraform query) has no private state
	}
	diags := p.SetKey(ctx, privateGeneration, strconv.AppendInt(nil, gen, 10))
	diags.Append(p.SetKey(ctx, privateGenerationV1, nil)...) // nil removes the old key, if any
	return diags
}

// replacedGeneration: in the plan of a create, the generation of the object
// it replaces, or 0. Terraform plans a replacement as the old object, then
// as a create with no prior state but with the private state the first plan
// returned, which holds the old object's generation (set by its create or
// refresh); a plain create has none.
func replacedGeneration(ctx context.Context, req resource.ModifyPlanRequest) int64 {
	if !req.State.Raw.IsNull() || req.Private == nil {
		return 0
	}
	return getGeneration(ctx, req.Private)
}

// privateMemberGenerations keeps an address set's members' generations (key
// -> generation) in private state: the set's destroy releases only those
// still at them, and the plan of a replacement marks them (see
// replacedMembers).
const privateMemberGenerations = "member_generations"

func setMemberGenerations(ctx context.Context, p privateState, members []ipam.SetMember) diag.Diagnostics {
	if noPrivate(p) {
		return nil
	}
	gens := make(map[string]int64, len(members))
	for _, m := range members {
		gens[m.Key] = m.Generation
	}
	b, _ := json.Marshal(gens)
	return p.SetKey(ctx, privateMemberGenerations, b)
}

// memberGenerations reads what setMemberGenerations kept; nil when nothing
// is (a state written before this version, or none).
func memberGenerations(ctx context.Context, p privateState) map[string]int64 {
	if noPrivate(p) {
		return nil
	}
	b, diags := p.GetKey(ctx, privateMemberGenerations)
	if diags.HasError() || len(b) == 0 {
		return nil
	}
	var gens map[string]int64
	if json.Unmarshal(b, &gens) != nil {
		return nil
	}
	return gens
}

// getGeneration reads what setGeneration kept, or what versions before it
// kept; 0 when neither is there (a state written before generations were).
func getGeneration(ctx context.Context, p privateState) int64 {
	if b, diags := p.GetKey(ctx, privateGeneration); !diags.HasError() && len(b) > 0 {
		if g, err := strconv.ParseInt(string(b), 10, 64); err == nil {
			return g
		}
	}
	b, diags := p.GetKey(ctx, privateGenerationV1)
	if diags.HasError() || len(b) == 0 {
		return 0
	}
	var g generationJSON
	if json.Unmarshal(b, &g) != nil {
		return 0
	}
	return g.Generation
}

// sameAddr returns prior when it spells the same address as canonical, so a
// user's "2001:DB8::1" is not reported as drift against "2001:db8::1".
func sameAddr(prior types.String, canonical netip.Addr) types.String {
	if !prior.IsNull() && !prior.IsUnknown() {
		if a, err := ipam.ParseAddr(prior.ValueString()); err == nil && a == canonical {
			return prior
		}
	}
	return types.StringValue(canonical.String())
}

func samePrefix(prior types.String, canonical netip.Prefix, written ...string) types.String {
	if !prior.IsNull() && !prior.IsUnknown() {
		if p, err := ipam.ParsePrefix(prior.ValueString()); err == nil && p == canonical {
			return prior
		}
	}
	for _, w := range written { // as for sameDuration
		if p, err := ipam.ParsePrefix(w); err == nil && p == canonical {
			return types.StringValue(w)
		}
	}
	return types.StringValue(canonical.String())
}

// sameDuration keeps the prior spelling of a duration that means the same;
// without one (an import), the spelling its writer used, so that the
// configuration that wrote it plans no change.
func sameDuration(prior types.String, canonical time.Duration, written string) types.String {
	if !prior.IsNull() && !prior.IsUnknown() {
		if d, err := ipam.ParseDuration(prior.ValueString()); err == nil && d == canonical {
			return prior
		}
	}
	if d, err := ipam.ParseDuration(written); err == nil && d == canonical {
		return types.StringValue(written)
	}
	return types.StringValue(ipam.FormatDuration(canonical))
}

func timeString(t time.Time) types.String {
	if t.IsZero() {
		return types.StringNull()
	}
	return types.StringValue(t.UTC().Format(time.RFC3339))
}

// addrList renders addresses as a Terraform list, keeping the prior spelling
// of each element that is unchanged.
func addrList(prior types.List, addrs []netip.Addr) types.List {
	var old []types.String
	if !prior.IsNull() && !prior.IsUnknown() {
		_ = prior.ElementsAs(context.Background(), &old, false)
	}
	vals := make([]attr.Value, len(addrs))
	for i, a := range addrs {
		p := types.StringNull()
		if i < len(old) {
			p = old[i]
		}
		vals[i] = sameAddr(p, a)
	}
	return types.ListValueMust(types.StringType, vals)
}

func optString(s string) types.String {
	if s == "" {
		return types.StringNull()
	}
	return types.StringValue(s)
}

// splitID splits "<a>/<b>" import ids.
func splitID(id string) (string, string, bool) {
	for i := 0; i < len(id); i++ {
		if id[i] == '/' {
			a, b := id[:i], id[i+1:]
			return a, b, a != "" && b != ""
		}
	}
	return "", "", false
}

// idOf plans a new object's id: the attributes it is made of, joined by
// "/", once they are all known. The create writes exactly that id, so the
// plan shows it, and a replacement, whose new object has the old one's id,
// shows it unchanged instead of "(known after apply)".
type idOf []string

func (k idOf) Description(context.Context) string {
	return "the id of a new object is " + strings.Join(k, "/") + ", known once they are"
}

func (k idOf) MarkdownDescription(ctx context.Context) string { return k.Description(ctx) }

func (k idOf) PlanModifyString(ctx context.Context, req planmodifier.StringRequest, resp *planmodifier.StringResponse) {
	if parts, ok := plannedStrings(ctx, req, k); ok {
		resp.PlanValue = types.StringValue(strings.Join(parts, "/"))
	}
}

// plannedStrings gives the planned values of the named string attributes,
// for a computed attribute made of them that the plan leaves unknown: ok
// when every one is known.
func plannedStrings(ctx context.Context, req planmodifier.StringRequest, names []string) ([]string, bool) {
	if !req.PlanValue.IsUnknown() || req.Plan.Raw.IsNull() {
		return nil, false
	}
	parts := make([]string, len(names))
	for i, name := range names {
		var v types.String
		if d := req.Plan.GetAttribute(ctx, path.Root(name), &v); d.HasError() || v.IsNull() || v.IsUnknown() {
			return nil, false
		}
		parts[i] = v.ValueString()
	}
	return parts, true
}
