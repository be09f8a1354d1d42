package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/netip"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/overlayipam/terraform-provider-ipam/ipam"
)

// usage's example finds the pools that alert, in the JSON usage --json
// really prints: a full pool beside a large empty one of its category,
// which the category's sum does not flag.
func TestUsageExampleFindsAlertingPools(t *testing.T) {
	example := (&app{}).usageCmd().Example
	m := regexp.MustCompile(`ipamctl usage --json \| jq -r '([^']*)'`).FindStringSubmatch(example)
	if m == nil || m[1] != usageAlertFilter {
		t.Fatalf("usage's example does not run jq with usageAlertFilter:\n%s", example)
	}
	w := newWorld(t)
	for _, e := range []string{"e1", "e2", "e3", "e4", "e5"} {
		w.alloc("c1/v4", ipam.Owner{Kind: ipam.OwnerEnvIPv4, ID: e, EnvID: e, OrgID: "acme"})
	}
	if _, err := w.st.CreatePool(w.ctx, ipam.Pool{ClusterID: "c1", Name: "big", Cooldown: time.Hour,
		CIDRs: []netip.Prefix{netip.MustParsePrefix("203.0.113.0/24")}}); err != nil {
		t.Fatal(err)
	}
	out := w.ipamctl("", "usage", "--json").must(t, 0).out

	// The filter's steps, on the JSON as printed: .[] the clusters,
	// .pools[] their pools, select(.alert), .pool_id.
	var clusters []map[string]any
	if err := json.Unmarshal([]byte(out), &clusters); err != nil {
		t.Fatal(err)
	}
	var alerting []string
	for _, c := range clusters {
		pools, ok := c["pools"].([]any)
		if !ok {
			t.Fatalf("no pools array in a cluster's usage:\n%s", out)
		}
		for _, p := range pools {
			p := p.(map[string]any)
			alert, ok := p["alert"].(bool)
			id, idOK := p["pool_id"].(string)
			if !ok || !idOK {
				t.Fatalf("a pool's usage lacks a boolean alert or a pool_id: %v", p)
			}
			if alert {
				alerting = append(alerting, id)
			}
		}
		// The category's sum, 5 of 6 + 256, does not alert: why the
		// example looks at the pools.
		for _, cat := range c["categories"].([]any) {
			if cat := cat.(map[string]any); cat["category"] == "ipv4" && cat["alert"] != false {
				t.Fatalf("the ipv4 category alerts; the test no longer shows the dilution: %v", cat)
			}
		}
	}
	if strings.Join(alerting, ",") != "c1/v4" {
		t.Fatalf("pools that alert: %v, want c1/v4\n%s", alerting, out)
	}
	// And jq itself, where it is installed, agrees.
	if jq, err := exec.LookPath("jq"); err == nil {
		cmd := exec.Command(jq, "-r", usageAlertFilter)
		cmd.Stdin = strings.NewReader(out)
		got, err := cmd.Output()
		if err != nil || string(got) != "c1/v4\n" {
			t.Fatalf("jq -r '%s': %q, %v", usageAlertFilter, got, err)
		}
	}
}

// A signal that ends a wait for the database says the command was
// interrupted, by which signal, and gives no advice on a bound that did not
// expire.
func TestInterruptedIsNotATimeout(t *testing.T) {
	ctx, cancel := context.WithCancelCause(context.Background())
	time.AfterFunc(1500*time.Millisecond, func() { cancel(interrupted{syscall.SIGTERM}) })
	r := runCLI(ctx, "", "--failover-timeout", "30s", "--database-url", "postgres://ipam@127.0.0.1:1/ipam", "usage")
	r.must(t, exitError, "ipam_unavailable", "ipamctl: interrupted by SIGTERM: the command stopped before it finished, not because a timeout expired")
	if strings.Contains(r.err, "larger failover_timeout") || strings.Contains(r.err, "needs a larger") {
		t.Fatalf("an interrupted wait advises a larger bound:\n%s", r.err)
	}
	// Not interrupted: the advice stays.
	r = runCLI(context.Background(), "", "--failover-timeout", "1s", "--database-url", "postgres://ipam@127.0.0.1:1/ipam", "usage")
	r.must(t, exitError, "larger failover_timeout")
	if strings.Contains(r.err, "interrupted") {
		t.Fatalf("a timeout told as an interrupt:\n%s", r.err)
	}
}

// signalContext cancels its context with the signal as the cause.
func TestSignalContextNamesTheSignal(t *testing.T) {
	ctx, stop := signalContext(context.Background(), syscall.SIGUSR1)
	defer stop()
	if err := syscall.Kill(os.Getpid(), syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the signal did not cancel the context")
	}
	var sig interrupted
	if !errors.As(context.Cause(ctx), &sig) || sig.sig != syscall.SIGUSR1 {
		t.Fatalf("cause %v", context.Cause(ctx))
	}
	if got := (interrupted{syscall.SIGTERM}).Error(); got != "interrupted by SIGTERM" {
		t.Fatalf("%q", got)
	}
	if got := (interrupted{os.Interrupt}).Error(); got != "interrupted by SIGINT" {
		t.Fatalf("%q", got)
	}
}

// reclaim --apply's refusal says what became of the rest: "the others were
// reclaimed" only when there are others.
func TestRefusedErrorCounts(t *testing.T) {
	for _, c := range []struct {
		refused, reclaimed, total int
		want                      string
	}{
		{6, 0, 6, "all 6 of the report's allocations were refused (see REASON); none was reclaimed"},
		{1, 0, 1, "the report's 1 allocation was refused (see REASON); none was reclaimed"},
		{2, 1, 3, "2 of the report's 3 allocation(s) refused (see REASON); the other one was reclaimed"},
		{1, 4, 5, "1 of the report's 5 allocation(s) refused (see REASON); the other 4 were reclaimed"},
		{1, 1, 3, "1 of the report's 3 allocation(s) refused (see REASON); 1 reclaimed"},
	} {
		if got := refusedError(c.refused, c.reclaimed, c.total).Error(); got != c.want {
			t.Errorf("refusedError(%d, %d, %d) = %q, want %q", c.refused, c.reclaimed, c.total, got, c.want)
		}
	}
}

// A plain inventory without --kind is a bad command line, told before the
// database is tried (here: nothing listens), so that a script tells the typo
// from an outage.
func TestInventoryWithoutKindIsUsage(t *testing.T) {
	var errb bytes.Buffer
	code := run(context.Background(), []string{"--failover-timeout", "0", "--database-url", "postgres://ipam@127.0.0.1:1/ipam",
		"leaks", "--inventory", "-"}, strings.NewReader("web-1\n"), &bytes.Buffer{}, &errb)
	if code != exitUsage || !strings.Contains(errb.String(), "--kind") || !strings.Contains(errb.String(), "node, instance, env_ipv4, set") ||
		strings.Contains(errb.String(), "ipam_unavailable") {
		t.Fatalf("exit %d:\n%s", code, errb.String())
	}
}
