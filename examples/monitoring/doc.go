// Package monitoring holds lbstate's Grafana dashboards (dashboards/)
// and alert rules (rules/) for Prometheus; see README.md. It has no code:
// its tests check the rules with promtool, and evaluate every dashboard
// query and rule against a real Prometheus scraping a real agent.
package monitoring
