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

// tfEnv is a built provider and a CLI configuration whose dev_overrides
// point terraform at it: no registry is contacted.
type tfEnv struct {
	bin     string // terraform
	dir     string
	cliConf string
	dbURL   string
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
	build := exec.CommandContext(ctx, "go", "build", "-o", filepath.Join(dir, "terraform-provider-ipam"), ".")
	build.Dir = r.cfg.RepoRoot
	if out, err := build.CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("building the provider: %v\n%s", err, out)
	}
	conf := filepath.Join(dir, "terraformrc")
	rc := fmt.Sprintf("provider_installation {\n  dev_overrides {\n    \"registry.terraform.io/overlayipam/ipam\" = %q\n  }\n  direct {}\n}\n", dir)
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

func (e *tfEnv) run(ctx context.Context, wd string, extraEnv []string, args ...string) (tfRun, error) {
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
	cmd.Env = append(append(env, "TF_CLI_CONFIG_FILE="+e.cliConf, "TF_IN_AUTOMATION=1", "CHECKPOINT_DISABLE=1", "IPAM_DATABASE_URL="+e.dbURL), extraEnv...)
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

func ipamHeader() string {
	return "terraform {\n  required_providers {\n    ipam = { source = \"overlayipam/ipam\" }\n  }\n}\n\nprovider \"ipam\" {}\n\n"
}

func instancesConfig(cluster string, n int) string {
	return ipamHeader() + fmt.Sprintf(`resource "ipam_instance_address" "r" {
  count       = %d
  cluster_id  = %q
  instance_id = "i-${count.index}"
  org_id      = "acme"
  env_id      = "prod"
}
`, n, cluster)
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

// pairResult is one configuration measured next to another.
type pairResult struct {
	applyA, applyB, planA, planB []time.Duration
	providerKB                   int64
	cpuA, cpuB                   time.Duration
	providerCPU                  time.Duration // config a's provider processes, apply and plan
	commits                      int64
	serverCPU                    time.Duration
}

// pair applies and then re-plans configuration a next to configuration b,
// rounds times, alternating which goes first. Each configuration gets a
// fresh cluster and working directory per round.
func (r *runner) pair(ctx context.Context, e *tfEnv, a, b func(cluster string) string, rounds int, envA []string) (*pairResult, error) {
	res := &pairResult{}
	setup, err := ipam.Open(ctx, ipam.Config{DatabaseURL: e.dbURL, MaxConnections: 1, Actor: "terraform"})
	if err != nil {
		return nil, err
	}
	defer setup.Close()
	for round := 0; round < rounds; round++ {
		var wds [2]string
		for i, cfg := range []func(string) string{a, b} {
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
		type step struct {
			wd    string
			args  []string
			into  *[]time.Duration
			cpu   *time.Duration
			first bool // configuration a
		}
		apply := []string{"apply", "-auto-approve", "-input=false"}
		plan := []string{"plan", "-input=false", "-detailed-exitcode"}
		steps := []step{{wds[0], apply, &res.applyA, &res.cpuA, true}, {wds[1], apply, &res.applyB, &res.cpuB, false},
			{wds[0], plan, &res.planA, &res.cpuA, true}, {wds[1], plan, &res.planB, &res.cpuB, false}}
		if round%2 == 1 {
			steps[0], steps[1], steps[2], steps[3] = steps[1], steps[0], steps[3], steps[2]
		}
		for _, s := range steps {
			counted := s.first && s.args[0] == "apply"
			var c0 int64
			var cpu0 cpuTimes
			if counted {
				c0 = r.commits(ctx, e.dbURL)
				cpu0 = r.srv.cpuStart()
			}
			var env []string
			if s.first {
				env = envA
			}
			out, err := e.run(ctx, s.wd, env, s.args...)
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
			*s.into = append(*s.into, out.wall)
			*s.cpu += out.cpu
			if s.first {
				res.providerKB = max(res.providerKB, out.providerKB)
				res.providerCPU += out.providerCPU
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

// terraformSection is section 4.
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
	res, err := r.pair(ctx, e, func(cl string) string { return instancesConfig(cl, n) }, func(string) string { return dataConfig(n) }, r.sz.TFRounds, nil)
	if err != nil {
		return err
	}
	for _, x := range []struct {
		what string
		a, b []time.Duration
	}{{"apply", res.applyA, res.applyB}, {"plan (refresh)", res.planA, res.planB}} {
		ma, mb := median(x.a), median(x.b)
		ratio := float64(ma) / float64(mb)
		r.rep.add(Row{Section: "4 terraform", Name: fmt.Sprintf("terraform %s of %d ipam_instance_address", x.what, n),
			Value: secs(ma), Reference: fmt.Sprintf("%d terraform_data: %s", n, secs(mb)), Ratio: fmt.Sprintf("%.2f", ratio),
			Target: "<= 1.30", Status: metOr(ratio <= 1.3)})
	}
	// Experiment: the same with the plugin SDK's logging off. Unless told
	// otherwise (TF_LOG_SDK*), terraform-plugin-go and the framework log at
	// TRACE, as JSON on stderr, which terraform reads and drops.
	quiet, err := r.pair(ctx, e, func(cl string) string { return instancesConfig(cl, n) }, func(string) string { return dataConfig(n) }, r.sz.TFRounds, sdkLogsOff)
	if err != nil {
		return err
	}
	for _, x := range []struct {
		what string
		a, b []time.Duration
	}{{"apply", quiet.applyA, quiet.applyB}, {"plan (refresh)", quiet.planA, quiet.planB}} {
		ma, mb := median(x.a), median(x.b)
		r.rep.add(Row{Section: "4 terraform (experiment)", Name: fmt.Sprintf("experiment: terraform %s of %d ipam_instance_address, plugin SDK logging off (%s)", x.what, n, strings.Join(sdkLogsOff, " ")),
			Value: secs(ma), Reference: fmt.Sprintf("%d terraform_data: %s", n, secs(mb)), Ratio: fmt.Sprintf("%.2f", float64(ma)/float64(mb)), Status: "info"})
	}
	r.rep.add(Row{Section: "4 terraform", Name: "provider process peak memory (VmHWM, max over its processes)",
		Value: fmt.Sprintf("%.1f MiB", float64(res.providerKB)/1024), Status: "info"})
	rounds := int64(r.sz.TFRounds)
	var lines []string
	lines = append(lines, fmt.Sprintf("Median of %d rounds, each a fresh cluster and fresh working directories, the two configurations alternating who goes first; terraform's default -parallelism=10, provider max_connections default (4), plan_reservations default (on).", r.sz.TFRounds))
	lines = append(lines, fmt.Sprintf("apply of %d ipam_instance_address: %.1f database transactions per resource (pg_stat_database xact_commit: plan-time holds, allocations and the reads around them), PostgreSQL server CPU %s per resource.",
		n, float64(res.commits)/float64(rounds)/float64(n), us(res.serverCPU/time.Duration(rounds)/time.Duration(n))))
	lines = append(lines, fmt.Sprintf("CPU per round (apply + plan): terraform and provider %s, of which the provider processes %s (%s per resource); terraform_data %s. With the plugin SDK's logging off: %s, of which the provider %s.",
		secs(res.cpuA/time.Duration(rounds)), secs(res.providerCPU/time.Duration(rounds)), us(res.providerCPU/time.Duration(rounds)/time.Duration(n)),
		secs(res.cpuB/time.Duration(rounds)), secs(quiet.cpuA/time.Duration(rounds)), secs(quiet.providerCPU/time.Duration(rounds))))
	var ra, rb []string
	for i := range res.applyA {
		ra = append(ra, secs(res.applyA[i])+" / "+secs(res.planA[i]))
		rb = append(rb, secs(res.applyB[i])+" / "+secs(res.planB[i]))
	}
	lines = append(lines, "rounds, apply / plan: ipam "+strings.Join(ra, ", ")+"; terraform_data "+strings.Join(rb, ", "))
	r.rep.note("Terraform overhead: details", lines)
	r.rep.Commands = append(r.rep.Commands,
		"terraform apply -auto-approve -input=false -no-color   (then) terraform plan -input=false -detailed-exitcode -no-color, in each working directory",
		"TF_CLI_CONFIG_FILE: provider_installation { dev_overrides { \"registry.terraform.io/overlayipam/ipam\" = <dir of the freshly built provider> } direct {} }")
	return nil
}

// sdkLogsOff turns off the plugin SDK's own logs in the provider process.
var sdkLogsOff = []string{"TF_LOG_SDK=off", "TF_LOG_SDK_PROTO=off", "TF_LOG_SDK_FRAMEWORK=off"}

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
	res, err := r.pair(ctx, e, func(cl string) string { return bulkSetConfig(cl, n) },
		func(cl string) string { return instancesConfig(cl, n) }, r.sz.TFRounds, nil)
	if err != nil {
		return err
	}
	for _, x := range []struct {
		what string
		a, b []time.Duration
	}{{"apply", res.applyA, res.applyB}, {"plan (refresh)", res.planA, res.planB}} {
		ma, mb := median(x.a), median(x.b)
		r.rep.add(Row{Section: "6 bulk", Name: name + ", " + x.what, Value: secs(ma), Reference: fmt.Sprintf("%s resources: %s", num(float64(n)), secs(mb)),
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
