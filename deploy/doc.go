// Package deploy holds the monitoring that goes with `ipamctl metrics`:
// Prometheus alert rules (prometheus/ipam-alerts.yml, unit-tested with
// promtool by prometheus/ipam-alerts_test.yml) and a Grafana dashboard
// (grafana/ipam-dashboard.json). It has no Go code; its test checks the files.
package deploy
