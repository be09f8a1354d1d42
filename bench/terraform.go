package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/overlayipam/terraform-provider-ipam/ipam"
)

// tfEnv is the built providers and a CLI configuration whose dev_overrides
// point terraform at them: no registry is contacted.
type tfEnv struct {
	bin     string // terraform
	dir     string
	cliConf string
	dbURL   string
}

// tfProviders are built into one directory under the names terraform looks
// for there: the provider, and the do-nothing one that is the fair reference
// for an external provider's overhead (bench/noopprovider).
var tfProviders = []struct{ address, binary, pkg string }{
	{"registry.terraform.io/overlayipam/ipam", "terraform-provider-ipam", "."},
	{"registry.terraform.io/overlayipam/noop", "terraform-provider-noop", "./bench/noopprovider"},
}

func (r *runner) tfSetup(ctx context.Context) (*tfEnv, error) {
	tf := r.terraformPath()
	if tf == "" {
		return nil, errSkip("terraform not found (set TF_ACC_TERRAFORM_PATH or put it on PATH)")
	}
	if r.cfg.RepoRoot == "" {
		return nil, fmt.Errorf("cannot find the module source to build the provider")
	}
	dir, err := os.MkdirTemp("", "ipambench-tf-")
	if err != nil {
		return nil, err
	}
	var overrides strings.Builder
	for _, p := range tfProviders {
		build := exec.CommandContext(ctx, "go", "build", "-o", filepath.Join(dir, p.binary), p.pkg)
		build.Dir = r.cfg.RepoRoot
		if out, err := build.CombinedOutput(); err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("building %s: %v\n%s", p.pkg, err, out)
		}
		fmt.Fprintf(&overrides, "    %q = %q\n", p.address, dir)
	}
	conf := filepath.Join(dir, "terraformrc")
	rc := "provider_installation {\n  dev_overrides {\n" + overrides.String() + "  }\n  direct {}\n}\n"
	if err := os.WriteFile(conf, []byte(rc), 0o600); err != nil {
		return nil, err
	}
	dbURL, err := r.createDB(ctx, "terraform")
	if err != nil {
		return nil, err
	}
	return &tfEnv{bin: tf, dir: dir, cliConf: conf, dbURL: dbURL}, nil
}

func (e *tfEnv) close() { os.RemoveAll(e.dir) }

type skipError string

func (e skipError) Error() string { return string(e) }
func errSkip(msg string) error    { return skipError(msg) }

// tfRun is one terraform command: its wall time, its own and its children's
// CPU, and the peak resident memory (VmHWM) of the provider processes it ran.
type tfRun struct {
	wall        time.Duration
	cpu         time.Duration // terraform and its children (the provider processes)
	providerCPU time.Duration // the provider processes alone (last reading before each exited)
	providerKB  int64
	out         string
}

func (e *tfEnv) run(ctx context.Context, wd string, args ...string) (tfRun, error) {
	var res tfRun
	cmd := exec.CommandContext(ctx, e.bin, append(args, "-no-color")...)
	cmd.Dir = wd
	env := []string{}
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "TF_LOG") || strings.HasPrefix(kv, "TF_CLI_CONFIG_FILE=") || strings.HasPrefix(kv, "IPAM_DATABASE_URL=") {
			continue
		}
		env = append(env, kv)
	}
	cmd.Env = append(env, "TF_CLI_CONFIG_FILE="+e.cliConf, "TF_IN_AUTOMATION=1", "CHECKPOINT_DISABLE=1", "IPAM_DATABASE_URL="+e.dbURL)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	t := time.Now()
	if err := cmd.Start(); err != nil {
		return res, err
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var peak int64
	ticks := map[int]int64{} // provider pid -> utime+stime last seen
	wg.Add(1)
	go func() {
		defer wg.Done()
		pid := cmd.Process.Pid
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			for _, c := range childrenOf(pid) {
				if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", c)); err == nil && strings.HasPrefix(string(b), "terraform-provi") {
					if kb, ok := procStatus(c, "VmHWM"); ok && kb > peak {
						peak = kb
					}
					if f, ok := procStat(c); ok {
						ticks[c] = f[11] + f[12]
					}
				}
			}
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	err := cmd.Wait()
	res.wall = time.Since(t)
	close(stop)
	wg.Wait()
	res.providerKB = peak
	for _, t := range ticks {
		res.providerCPU += time.Duration(t) * time.Second / clockTick
	}
	res.out = out.String()
	if cmd.ProcessState != nil {
		res.cpu = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	}
	if err != nil {
		return res, fmt.Errorf("terraform %s: %v\n%s", strings.Join(args, " "), err, lastLines(res.out, 15))
	}
	return res, nil
}

func childrenOf(pid int) []int {
	dir, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []int
	for _, e := range dir {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if f, ok := procStat(p); ok && f[1] == int64(pid) {
			out = append(out, p)
		}
	}
	return out
}

func ipamHeader() string { return ipamHeaderWith("") }

// ipamHeaderWith is the header with the provider's block holding settings.
func ipamHeaderWith(settings string) string {
	return "terraform {\n  required_providers {\n    ipam = { source = \"overlayipam/ipam\" }\n  }\n}\n\nprovider \"ipam\" {" + settings + "}\n\n"
}

func instancesConfig(cluster string, n int) string {
	return ipamHeader() + instancesResources(cluster, n)
}

// instancesNoHoldsConfig is instancesConfig with plan_reservations off: the
// plan shows the addresses as known after apply, and apply allocates them.
func instancesNoHoldsConfig(cluster string, n int) string {
	return ipamHeaderWith(" plan_reservations = false ") + instancesResources(cluster, n)
}

func instancesResources(cluster string, n int) string {
	return fmt.Sprintf(`resource "ipam_instance_address" "r" {
  count       = %d
  cluster_id  = %q
  instance_id = "i-${count.index}"
  org_id      = "acme"
  env_id      = "prod"
}
`, n, cluster)
}

// noopConfig is instancesConfig for the do-nothing provider's noop_thing: n
// resources with the same owner names and labels, and nothing behind them.
func noopConfig(n int) string {
	return noopResources("noop_thing", n, `name   = "i-${count.index}"`)
}

// noopInstanceConfig is n noop_instance: ipam_instance_address's schema,
// the same arguments, and nothing behind them.
func noopInstanceConfig(n int) string {
	return noopResources("noop_instance", n, `cluster_id  = "c1"
  instance_id = "i-${count.index}"`)
}

// noopResources is n resources of a do-nothing type with key, then the
// labels every configuration of the section has.
func noopResources(typ string, n int, key string) string {
	return fmt.Sprintf(`terraform {
  required_providers {
    noop = { source = "overlayipam/noop" }
  }
}

resource %q "r" {
  count  = %d
  %s
  org_id = "acme"
  env_id = "prod"
}
`, typ, n, key)
}

func dataConfig(n int) string {
	return fmt.Sprintf(`resource "terraform_data" "r" {
  count = %d
  input = "i-${count.index}"
}
`, n)
}

// bulkSetConfig is one ipam_address_set holding n keys, each an IPv6
// address from the cluster's instance pool (the default IPv6 pool): what n
// ipam_instance_address resources hold, in one resource. Return "" to
// report the bulk row as n/a.
func bulkSetConfig(cluster string, n int) string {
	return ipamHeader() + fmt.Sprintf(`resource "ipam_address_set" "s" {
  cluster_id = %q
  owner_id   = "bulk"
  org_id     = "acme"
  env_id     = "prod"
  addresses  = { for i in range(%d) : "k${i}" => { family = "ipv6" } }
}
`, cluster, n)
}

// The timed steps of a round, in order: apply, then a plan that refreshes
// every resource and must find no change.
const (
	applyStep = iota
	planStep
)

var (
	stepNames = [...]string{"apply", "plan (refresh)"}
	stepArgs  = [...][]string{{"apply", "-auto-approve", "-input=false"}, {"plan", "-input=false", "-detailed-exitcode"}}
)

// tfResult is one configuration's side of a comparison.
type tfResult struct {
	times       [len(stepNames)][]time.Duration // per step, one per round
	cpu         time.Duration                   // terraform and its children, all steps and rounds
	providerCPU time.Duration                   // the provider processes alone
	providerKB  int64                           // peak of any one provider process
}

// comparison is configurations measured side by side.
type comparison struct {
	cfg       []tfResult    // in the order given to compare
	commits   int64         // database transactions of the first configuration's applies
	serverCPU time.Duration // PostgreSQL server CPU during them
}

// compare applies and then re-plans each configuration, rounds times, the
// configurations taking turns to go first (round k starts with the k-th,
// modulo their number). Each configuration gets a fresh cluster and working
// directory per round.
func (r *runner) compare(ctx context.Context, e *tfEnv, rounds int, cfgs ...func(cluster string) string) (*comparison, error) {
	res := &comparison{cfg: make([]tfResult, len(cfgs))}
	setup, err := ipam.Open(ctx, ipam.Config{DatabaseURL: e.dbURL, MaxConnections: 1, Actor: "terraform"})
	if err != nil {
		return nil, err
	}
	defer setup.Close()
	for round := 0; round < rounds; round++ {
		wds := make([]string, len(cfgs))
		for i, cfg := range cfgs {
			n := clusterSeq.Add(1)
			cl, err := setup.CreateCluster(ctx, ipam.Cluster{ID: fmt.Sprintf("tf%d", n),
				Prefix:       netip.MustParsePrefix(fmt.Sprintf("2001:db8:%x::/48", 0x100+n)),
				NodeCooldown: ipam.DefaultNodeCooldown, InstanceCooldown: ipam.DefaultInstanceCooldown})
			if err != nil {
				return nil, err
			}
			wds[i] = filepath.Join(e.dir, fmt.Sprintf("w%d", n))
			if err := os.MkdirAll(wds[i], 0o755); err != nil {
				return nil, err
			}
			if err := os.WriteFile(filepath.Join(wds[i], "main.tf"), []byte(cfg(cl.ID)), 0o644); err != nil {
				return nil, err
			}
		}
		for step, args := range stepArgs {
			for k := range cfgs {
				i := (round + k) % len(cfgs)
				counted := i == 0 && step == applyStep
				var c0 int64
				var cpu0 cpuTimes
				if counted {
					c0 = r.commits(ctx, e.dbURL)
					cpu0 = r.srv.cpuStart()
				}
				out, err := e.run(ctx, wds[i], args...)
				if err != nil {
					return nil, err
				}
				if counted {
					time.Sleep(600 * time.Millisecond) // let the provider's backends report their statistics
					res.commits += r.commits(ctx, e.dbURL) - c0
					if cpu1 := r.srv.cpuEnd(); cpu0.ok && cpu1.ok {
						res.serverCPU += cpu1.server - cpu0.server
					}
				}
				c := &res.cfg[i]
				c.times[step] = append(c.times[step], out.wall)
				c.cpu += out.cpu
				c.providerCPU += out.providerCPU
				c.providerKB = max(c.providerKB, out.providerKB)
			}
		}
	}
	return res, nil
}

// commits is the committed transactions of a database so far.
func (r *runner) commits(ctx context.Context, dbURL string) int64 {
	name := dbURL[strings.LastIndex(dbURL, "/")+1:]
	if i := strings.IndexByte(name, '?'); i >= 0 {
		name = name[:i]
	}
	var n int64
	_, _ = r.srv.conn.Exec(ctx, "SELECT pg_stat_clear_snapshot()")
	_ = r.srv.conn.QueryRow(ctx, `SELECT xact_commit FROM pg_stat_database WHERE datname = $1`, name).Scan(&n)
	return n
}

func median(d []time.Duration) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

func secs(d time.Duration) string { return fmt.Sprintf("%.2f s", d.Seconds()) }

// terraformSection is section 4: the provider next to a do-nothing provider,
// the fair reference (both pay the plugin protocol, only the IPAM does work),
// and next to terraform_data (built into terraform: no plugin at all); then
// at TFLargeResources for memory and how refresh scales.
func (r *runner) terraformSection(ctx context.Context) error {
	e, err := r.tfEnvOnce(ctx)
	if err != nil {
		if _, ok := err.(skipError); ok {
			r.rep.add(Row{Section: "4 terraform", Name: "terraform apply / plan", Value: "skipped: " + err.Error(), Status: "skipped"})
			return nil
		}
		return err
	}
	n := r.sz.TFResources
	res, err := r.compare(ctx, e, r.sz.TFRounds, func(cl string) string { return instancesConfig(cl, n) },
		func(string) string { return noopConfig(n) }, func(string) string { return dataConfig(n) },
		func(string) string { return noopInstanceConfig(n) }, func(cl string) string { return instancesNoHoldsConfig(cl, n) })
	if err != nil {
		return err
	}
	ipamRes, noop, data, noopWide, noHolds := res.cfg[0], res.cfg[1], res.cfg[2], res.cfg[3], res.cfg[4]
	over := func(a, b tfResult, step int) float64 {
		return float64(median(a.times[step])) / float64(median(b.times[step]))
	}
	for step, what := range stepNames {
		m, mn, md, mw := median(ipamRes.times[step]), median(noop.times[step]), median(data.times[step]), median(noopWide.times[step])
		name := fmt.Sprintf("terraform %s of %d ipam_instance_address", what, n)
		ratio := over(ipamRes, noop, step)
		r.rep.add(Row{Section: "4 terraform", Name: name + " vs a do-nothing provider",
			Value: secs(m), Reference: fmt.Sprintf("%d noop_thing: %s", n, secs(mn)), Ratio: fmt.Sprintf("%.2f", ratio),
			Target: "<= 1.10", Status: metOr(ratio <= 1.1)})
		wide := Row{Section: "4 terraform", Name: name + " vs a do-nothing resource with its schema",
			Value: secs(m), Reference: fmt.Sprintf("%d noop_instance: %s", n, secs(mw)), Ratio: fmt.Sprintf("%.2f", over(ipamRes, noopWide, step)), Status: "info"}
		if step == applyStep && !r.cfg.Smoke {
			wide.Target, wide.Status = "<= 1.15", metOr(over(ipamRes, noopWide, step) <= 1.15)
		}
		r.rep.add(wide)
		r.rep.add(Row{Section: "4 terraform", Name: name + " vs terraform_data (built into terraform)",
			Value: secs(m), Reference: fmt.Sprintf("%d terraform_data: %s", n, secs(md)), Ratio: fmt.Sprintf("%.2f", over(ipamRes, data, step)), Status: "info"})
		r.rep.add(Row{Section: "4 terraform", Name: fmt.Sprintf("terraform %s of %d ipam_instance_address with plan_reservations = false, vs a do-nothing resource with its schema", what, n),
			Value: secs(median(noHolds.times[step])), Reference: fmt.Sprintf("%d noop_instance: %s", n, secs(mw)), Ratio: fmt.Sprintf("%.2f", over(noHolds, noopWide, step)), Status: "info"})
	}
	r.rep.add(Row{Section: "4 terraform", Name: fmt.Sprintf("provider process peak memory (VmHWM, max over its processes), %d ipam_instance_address", n),
		Value: mib(ipamRes.providerKB), Reference: fmt.Sprintf("%d noop_thing: %s", n, mib(noop.providerKB)), Status: "info"})
	rounds := time.Duration(r.sz.TFRounds)
	perRound := func(c tfResult) string {
		return fmt.Sprintf("%s, of which the provider processes %s (%s per resource)", secs(c.cpu/rounds), secs(c.providerCPU/rounds), us(c.providerCPU/rounds/time.Duration(n)))
	}
	// Transactions per created resource: the plan's hold, the apply's
	// re-plan and the create (the provider's few reads of the cluster and
	// the schema shared out over all of them).
	perResource := float64(res.commits) / float64(rounds) / float64(n)
	tx := Row{Section: "4 terraform", Name: fmt.Sprintf("database transactions per created resource, apply of %d ipam_instance_address", n),
		Value: fmt.Sprintf("%.2f", perResource), Status: "info"}
	if !r.cfg.Smoke {
		tx.Target, tx.Status = "<= 3", metOr(perResource <= 3)
	}
	r.rep.add(tx)
	var lines []string
	lines = append(lines, fmt.Sprintf("Median of %d rounds, each a fresh cluster and fresh working directories, the five configurations taking turns to go first; terraform's default -parallelism=10, provider max_connections default (4), plan_reservations default (on) but in the configuration that turns it off. noop_thing is bench/noopprovider: the plugin framework, protocol 6 and the real provider's logging defaults, no I/O, five string attributes. noop_instance, in the same provider, has ipam_instance_address's attributes (names, types, required, optional and computed, the same kept-from-state plan modifiers; a test keeps the two the same) and nothing else: no validators, no plan-time work, no identity, no I/O.", r.sz.TFRounds))
	lines = append(lines, fmt.Sprintf("apply of %d ipam_instance_address: %.1f database transactions per resource (pg_stat_database xact_commit: plan-time holds, allocations and the reads around them), PostgreSQL server CPU %s per resource.",
		n, float64(res.commits)/float64(rounds)/float64(n), us(res.serverCPU/rounds/time.Duration(n))))
	lines = append(lines, fmt.Sprintf("CPU per round (apply + plan), terraform and its provider processes: ipam %s; ipam without plan-time holds %s; do-nothing provider %s; do-nothing resource with ipam_instance_address's schema %s; terraform_data %s.",
		perRound(ipamRes), perRound(noHolds), perRound(noop), perRound(noopWide), secs(data.cpu/rounds)))
	lines = append(lines, fmt.Sprintf("The plugin protocol alone, noop_thing over terraform_data: apply %.2f, plan (refresh) %.2f. The schema's size alone, noop_instance over noop_thing: apply %.2f, plan (refresh) %.2f.",
		over(noop, data, applyStep), over(noop, data, planStep), over(noopWide, noop, applyStep), over(noopWide, noop, planStep)))
	large, err := r.terraformLarge(ctx, e, res)
	if err != nil {
		return err
	}
	lines = append(lines, large...)
	roundsLine := "rounds, apply / plan:"
	for _, c := range []struct {
		name string
		res  tfResult
	}{{"ipam", ipamRes}, {"ipam without plan-time holds", noHolds}, {"noop_thing", noop}, {"noop_instance", noopWide}, {"terraform_data", data}} {
		var rs []string
		for i := range c.res.times[applyStep] {
			rs = append(rs, secs(c.res.times[applyStep][i])+" / "+secs(c.res.times[planStep][i]))
		}
		roundsLine += " " + c.name + " " + strings.Join(rs, ", ") + ";"
	}
	lines = append(lines, strings.TrimSuffix(roundsLine, ";"))
	r.rep.note("Terraform overhead: details", lines)
	r.rep.Commands = append(r.rep.Commands,
		"terraform apply -auto-approve -input=false -no-color   (then) terraform plan -input=false -detailed-exitcode -no-color, in each working directory",
		"TF_CLI_CONFIG_FILE: provider_installation { dev_overrides { \"registry.terraform.io/overlayipam/ipam\" = <dir>, \"registry.terraform.io/overlayipam/noop\" = <dir> } direct {} }, <dir> holding the freshly built provider and bench/noopprovider")
	return nil
}

// terraformLarge is the section's large run: TFLargeResources
// ipam_instance_address next to as many noop_thing, one round (at 5,000 a
// round takes minutes). It reports the provider's peak memory, and refresh
// time per resource against the section's run at TFResources (small, by its
// medians): 1 is linear. It returns lines for the details note.
func (r *runner) terraformLarge(ctx context.Context, e *tfEnv, small *comparison) ([]string, error) {
	n, ns := r.sz.TFLargeResources, r.sz.TFResources
	if n <= 0 {
		return nil, nil
	}
	res, err := r.compare(ctx, e, 1, func(cl string) string { return instancesConfig(cl, n) }, func(string) string { return noopConfig(n) })
	if err != nil {
		return nil, err
	}
	ipamRes, noop := res.cfg[0], res.cfg[1]
	r.rep.add(Row{Section: "4 terraform", Name: fmt.Sprintf("provider process peak memory (VmHWM), apply + refresh of %s ipam_instance_address", num(float64(n))),
		Value: mib(ipamRes.providerKB), Reference: fmt.Sprintf("%s noop_thing: %s", num(float64(n)), mib(noop.providerKB)),
		Target: "< 150 MiB", Status: metOr(ipamRes.providerKB < 150*1024)})
	// scaled is time per resource at n over time per resource at ns.
	scaled := func(step int, at, base tfResult) float64 {
		return at.times[step][0].Seconds() / float64(n) / (median(base.times[step]).Seconds() / float64(ns))
	}
	ratio := scaled(planStep, ipamRes, small.cfg[0])
	r.rep.add(Row{Section: "4 terraform", Name: fmt.Sprintf("terraform plan (refresh) of %s ipam_instance_address, time per resource vs at %s", num(float64(n)), num(float64(ns))),
		Value: secs(ipamRes.times[planStep][0]), Reference: fmt.Sprintf("at %s: %s (noop_thing scales %.2f)", num(float64(ns)), secs(median(small.cfg[0].times[planStep])), scaled(planStep, noop, small.cfg[1])),
		Ratio: fmt.Sprintf("%.2f", ratio), Target: "<= 1.15 (at most linear, 15% tolerance)", Status: metOr(ratio <= 1.15)})
	vs := func(step int) string {
		return fmt.Sprintf("ipam %s, noop_thing %s (%.2f); per resource %.2f and %.2f of that at %s", secs(ipamRes.times[step][0]), secs(noop.times[step][0]),
			ipamRes.times[step][0].Seconds()/noop.times[step][0].Seconds(), scaled(step, ipamRes, small.cfg[0]), scaled(step, noop, small.cfg[1]), num(float64(ns)))
	}
	return []string{fmt.Sprintf("%s resources, one round (ipam_instance_address first, then as many noop_thing): apply %s; plan (refresh) %s. Peak memory: the largest VmHWM of one provider process over both commands.",
		num(float64(n)), vs(applyStep), vs(planStep))}, nil
}

func mib(kb int64) string { return fmt.Sprintf("%.1f MiB", float64(kb)/1024) }

func (r *runner) tfEnvOnce(ctx context.Context) (*tfEnv, error) {
	if r.tf != nil || r.tfErr != nil {
		return r.tf, r.tfErr
	}
	r.tf, r.tfErr = r.tfSetup(ctx)
	return r.tf, r.tfErr
}

// bulkSection is section 6: one address set of BulkKeys keys next to as many
// resources. It reports n/a until the provider has an address set resource
// and bulkSetConfig describes one.
func (r *runner) bulkSection(ctx context.Context) error {
	n := r.sz.BulkKeys
	name := fmt.Sprintf("%s keys in one address set vs %s ipam_instance_address", num(float64(n)), num(float64(n)))
	if bulkSetConfig("c", n) == "" {
		r.rep.add(Row{Section: "6 bulk", Name: name, Value: "n/a (address sets not implemented)", Status: "n/a"})
		return nil
	}
	e, err := r.tfEnvOnce(ctx)
	if err != nil {
		r.rep.add(Row{Section: "6 bulk", Name: name, Value: "skipped: " + err.Error(), Status: "skipped"})
		return nil
	}
	if !providerResources(ctx, e)["ipam_address_set"] {
		r.rep.add(Row{Section: "6 bulk", Name: name, Value: "n/a (address sets not implemented: the provider has no ipam_address_set)", Status: "n/a"})
		return nil
	}
	res, err := r.compare(ctx, e, r.sz.TFRounds, func(cl string) string { return bulkSetConfig(cl, n) },
		func(cl string) string { return instancesConfig(cl, n) })
	if err != nil {
		return err
	}
	for step, what := range stepNames {
		ma, mb := median(res.cfg[0].times[step]), median(res.cfg[1].times[step])
		r.rep.add(Row{Section: "6 bulk", Name: name + ", " + what, Value: secs(ma), Reference: fmt.Sprintf("%s resources: %s", num(float64(n)), secs(mb)),
			Ratio: fmt.Sprintf("%.2f", float64(ma)/float64(mb)), Status: "info"})
	}
	return nil
}

// providerResources lists the provider's resource types, from its schema.
func providerResources(ctx context.Context, e *tfEnv) map[string]bool {
	wd := filepath.Join(e.dir, "schema")
	if err := os.MkdirAll(wd, 0o755); err != nil {
		return nil
	}
	if err := os.WriteFile(filepath.Join(wd, "main.tf"), []byte(ipamHeader()), 0o644); err != nil {
		return nil
	}
	cmd := exec.CommandContext(ctx, e.bin, "providers", "schema", "-json")
	cmd.Dir = wd
	cmd.Env = append(os.Environ(), "TF_CLI_CONFIG_FILE="+e.cliConf, "CHECKPOINT_DISABLE=1", "IPAM_DATABASE_URL="+e.dbURL)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.Output()
	if err != nil {
		return nil
	}
	var doc struct {
		Schemas map[string]struct {
			Resources map[string]json.RawMessage `json:"resource_schemas"`
		} `json:"provider_schemas"`
	}
	if json.Unmarshal(out, &doc) != nil {
		return nil
	}
	types := map[string]bool{}
	for _, s := range doc.Schemas {
		for t := range s.Resources {
			types[t] = true
		}
	}
	return types
}
