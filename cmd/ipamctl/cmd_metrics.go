package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"

	"github.com/overlayipam/terraform-provider-ipam/ipam"
	"github.com/overlayipam/terraform-provider-ipam/ipam/operator"
)

// The exported metrics. deploy/prometheus/ipam-alerts.yml and
// deploy/grafana/ipam-dashboard.json use these names.
var (
	poolLabels     = []string{"cluster", "category", "pool"}
	categoryLabels = []string{"cluster", "category"}

	descUp = prometheus.NewDesc("ipam_database_up",
		"1 when the IPAM database answered this scrape, 0 when it could not be reached or queried.", nil, nil)
	descScrape = prometheus.NewDesc("ipam_scrape_duration_seconds",
		"How long reading the figures from the database took.", nil, nil)
	descBuild = prometheus.NewDesc("ipam_exporter_build_info",
		"The ipamctl version serving these metrics.", []string{"version"}, nil)

	descPoolSize     = prometheus.NewDesc("ipam_pool_size", "Addresses the pool can hand out.", poolLabels, nil)
	descPoolActive   = prometheus.NewDesc("ipam_pool_active", "Active addresses of the pool.", poolLabels, nil)
	descPoolReserved = prometheus.NewDesc("ipam_pool_reserved", "Live plan-time holds of the pool.", poolLabels, nil)
	descPoolCooling  = prometheus.NewDesc("ipam_pool_cooling", "Released addresses of the pool inside their cooldown.", poolLabels, nil)
	descPoolFree     = prometheus.NewDesc("ipam_pool_free", "Addresses of the pool that can be handed out now.", poolLabels, nil)
	descPoolUtil     = prometheus.NewDesc("ipam_pool_utilization",
		"(active + reserved + cooling) / size of the pool, 0 to 1; the alert threshold is 0.8.", poolLabels, nil)
	descPoolAlert = prometheus.NewDesc("ipam_pool_alert",
		"1 when the pool's utilization is at or above 0.8.", poolLabels, nil)
	descQueue = prometheus.NewDesc("ipam_cooldown_queue_size",
		"Released addresses of the pool still inside their cooldown.", poolLabels, nil)
	descQueueNext = prometheus.NewDesc("ipam_cooldown_next_reusable_timestamp_seconds",
		"When the first address of the pool's cooldown queue becomes reusable (only while the queue is not empty).", poolLabels, nil)
	descFailures = prometheus.NewDesc("ipam_allocation_failures_total",
		"Failed allocations recorded by the allocator, by reason (ipam_exhausted, ipam_unavailable, ...).",
		[]string{"cluster", "category", "pool", "reason"}, nil)

	descCatSize   = prometheus.NewDesc("ipam_category_size", "Addresses of all pools of the category.", categoryLabels, nil)
	descCatActive = prometheus.NewDesc("ipam_category_active", "Active addresses of the category.", categoryLabels, nil)
	descCatUtil   = prometheus.NewDesc("ipam_category_utilization",
		"(active + reserved + cooling) / size over all pools of the category, 0 to 1.", categoryLabels, nil)
	descCatQueue = prometheus.NewDesc("ipam_category_cooldown_queue_size",
		"Released addresses of the category still inside their cooldown.", categoryLabels, nil)
)

// collector reads the figures from the database on every scrape.
type collector struct {
	st      *ipam.Client
	timeout time.Duration
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descUp, descScrape, descBuild, descPoolSize, descPoolActive, descPoolReserved,
		descPoolCooling, descPoolFree, descPoolUtil, descPoolAlert, descQueue, descQueueNext, descFailures,
		descCatSize, descCatActive, descCatUtil, descCatQueue} {
		ch <- d
	}
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(descBuild, prometheus.GaugeValue, 1, version)
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	start := time.Now()
	snap, err := operator.New(c.st).CollectMetrics(ctx)
	ch <- prometheus.MustNewConstMetric(descScrape, prometheus.GaugeValue, time.Since(start).Seconds())
	if err != nil {
		ch <- prometheus.MustNewConstMetric(descUp, prometheus.GaugeValue, 0)
		return
	}
	ch <- prometheus.MustNewConstMetric(descUp, prometheus.GaugeValue, 1)
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	for _, cu := range snap.Clusters {
		for _, p := range cu.Pools {
			l := []string{p.ClusterID, p.Category, p.PoolID}
			gauge(descPoolSize, float64(p.Size), l...)
			gauge(descPoolActive, float64(p.Active), l...)
			gauge(descPoolReserved, float64(p.Reserved), l...)
			gauge(descPoolCooling, float64(p.Cooling), l...)
			gauge(descPoolFree, float64(p.Free), l...)
			gauge(descPoolUtil, p.Utilization, l...)
			gauge(descPoolAlert, boolFloat(p.Alert), l...)
			gauge(descQueue, float64(p.CooldownQueue.Count), l...)
			if next := p.CooldownQueue.NextReusableAt; next != nil {
				gauge(descQueueNext, float64(next.Unix()), l...)
			}
		}
		for _, c := range cu.Categories {
			l := []string{c.ClusterID, c.Category}
			gauge(descCatSize, float64(c.Size), l...)
			gauge(descCatActive, float64(c.Active), l...)
			gauge(descCatUtil, c.Utilization, l...)
			gauge(descCatQueue, float64(c.CooldownQueue.Count), l...)
		}
	}
	for _, f := range snap.Failures {
		ch <- prometheus.MustNewConstMetric(descFailures, prometheus.CounterValue, float64(f.Count), f.ClusterID, f.Category, f.PoolID, f.Reason)
	}
}

func boolFloat(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// scrapeTimeout is how long a scrape may wait for the database: the flag's
// bound, or less: a tenth (at most a second) inside the scrape timeout Prometheus
// sends, so that ipam_database_up 0 reaches Prometheus before it gives up on
// the scrape.
func scrapeTimeout(flag time.Duration, h http.Header) time.Duration {
	secs, err := strconv.ParseFloat(h.Get("X-Prometheus-Scrape-Timeout-Seconds"), 64)
	if err != nil || secs <= 0 {
		return flag
	}
	theirs := time.Duration(secs * float64(time.Second))
	theirs -= min(time.Second, theirs/10)
	return min(flag, theirs)
}

func (a *app) metricsCmd() *cobra.Command {
	var listen string
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "metrics --listen ADDR",
		Short: "Serve Prometheus metrics of pool usage, failures, cooldown queues and database reachability",
		Long: `Serves /metrics for Prometheus. Each scrape reads the figures from the database:
per cluster, category and pool: ipam_pool_size, _active, _reserved, _cooling, _free,
_utilization and _alert; ipam_cooldown_queue_size and
ipam_cooldown_next_reusable_timestamp_seconds; ipam_category_utilization;
ipam_allocation_failures_total by reason (a counter); and ipam_database_up, 0 while the database
cannot be reached (the exporter keeps serving). Alert rules and a Grafana dashboard for these
are in deploy/. Runs until interrupted.`,
		Example: `  ipamctl metrics --listen :9478
  ipamctl metrics --listen 127.0.0.1:9478 --scrape-timeout 5s`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if listen == "" {
				return badUsage("--listen ADDR is required, e.g. --listen :9478")
			}
			if timeout <= 0 {
				return badUsage("--scrape-timeout must be positive")
			}
			// Not checking the schema: the exporter reports an unreachable
			// database as ipam_database_up 0 instead of refusing to start.
			st, err := a.open(cmd.Context(), false)
			if err != nil {
				return err
			}
			mux := http.NewServeMux()
			mux.HandleFunc("/metrics", func(w http.ResponseWriter, r *http.Request) {
				reg := prometheus.NewRegistry()
				reg.MustRegister(&collector{st: st, timeout: scrapeTimeout(timeout, r.Header)})
				promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}).ServeHTTP(w, r)
			})
			mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != "/" {
					http.NotFound(w, r)
					return
				}
				fmt.Fprintln(w, `<html><body><h1>ipamctl metrics</h1><p><a href="/metrics">/metrics</a></p></body></html>`)
			})
			ln, err := net.Listen("tcp", listen)
			if err != nil {
				return fmt.Errorf("--listen %s: %w", listen, err)
			}
			srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
			fmt.Fprintf(a.errOut, "serving Prometheus metrics on http://%s/metrics (database %s)\n", ln.Addr(), st.Addr())
			done := make(chan error, 1)
			go func() { done <- srv.Serve(ln) }()
			select {
			case err := <-done:
				return err
			case <-cmd.Context().Done():
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := srv.Shutdown(ctx); err != nil {
				return err
			}
			if err := <-done; !errors.Is(err, http.ErrServerClosed) {
				return err
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&listen, "listen", "", "address to serve on, e.g. :9478 or 127.0.0.1:9478")
	cmd.Flags().DurationVar(&timeout, "scrape-timeout", 8*time.Second, "how long one scrape may wait for the database, "+
		"at most: less when Prometheus's own scrape timeout (its X-Prometheus-Scrape-Timeout-Seconds header) is shorter, "+
		"so that a scrape of an unreachable database still reports ipam_database_up 0 in time")
	return cmd
}
