package reconciler

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cilium/hive/cell"
)

// Metrics records what statedb's reconciler reports (operation durations
// and errors, prune durations and errors) and writes them in the
// Prometheus text exposition format, so an agent can serve them without a
// metrics library.
type Metrics struct {
	mu        sync.Mutex
	durations map[metricKey]*summary
	errors    map[metricKey]int
	pruneErrs map[metricKey]int
}

type metricKey struct{ module, name, op string }

type summary struct {
	count uint64
	sum   time.Duration
}

// NewMetrics returns empty metrics.
func NewMetrics() *Metrics {
	return &Metrics{durations: map[metricKey]*summary{}, errors: map[metricKey]int{}, pruneErrs: map[metricKey]int{}}
}

func (m *Metrics) observe(k metricKey, d time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.durations[k]
	if s == nil {
		s = &summary{}
		m.durations[k] = s
	}
	s.count++
	s.sum += d
}

func (m *Metrics) ReconciliationDuration(id cell.FullModuleID, name, op string, d time.Duration) {
	m.observe(metricKey{id.String(), name, op}, d)
}

func (m *Metrics) ReconciliationErrors(id cell.FullModuleID, name string, new, current int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.errors[metricKey{id.String(), name, ""}] = current
}

func (m *Metrics) PruneError(id cell.FullModuleID, name string, err error) {
	if err == nil {
		return // statedb reports every prune, failed or not
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.pruneErrs[metricKey{id.String(), name, ""}]++
}

func (m *Metrics) PruneDuration(id cell.FullModuleID, name string, d time.Duration) {
	m.observe(metricKey{id.String(), name, "prune"}, d)
}

// WritePrometheus writes the metrics in the Prometheus text format.
func (m *Metrics) WritePrometheus(w io.Writer) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	var sb strings.Builder
	sb.WriteString("# HELP lbstate_reconciler_duration_seconds Time spent in reconciliation operations.\n")
	sb.WriteString("# TYPE lbstate_reconciler_duration_seconds summary\n")
	for _, k := range sortedKeys(m.durations) {
		s := m.durations[k]
		labels := fmt.Sprintf(`module=%q,name=%q,operation=%q`, k.module, k.name, k.op)
		fmt.Fprintf(&sb, "lbstate_reconciler_duration_seconds_sum{%s} %g\n", labels, s.sum.Seconds())
		fmt.Fprintf(&sb, "lbstate_reconciler_duration_seconds_count{%s} %d\n", labels, s.count)
	}
	sb.WriteString("# HELP lbstate_reconciler_errors Objects whose reconciliation currently fails.\n")
	sb.WriteString("# TYPE lbstate_reconciler_errors gauge\n")
	for _, k := range sortedKeys(m.errors) {
		fmt.Fprintf(&sb, "lbstate_reconciler_errors{module=%q,name=%q} %d\n", k.module, k.name, m.errors[k])
	}
	sb.WriteString("# HELP lbstate_reconciler_prune_errors_total Failed prunes.\n")
	sb.WriteString("# TYPE lbstate_reconciler_prune_errors_total counter\n")
	for _, k := range sortedKeys(m.pruneErrs) {
		fmt.Fprintf(&sb, "lbstate_reconciler_prune_errors_total{module=%q,name=%q} %d\n", k.module, k.name, m.pruneErrs[k])
	}
	_, err := io.WriteString(w, sb.String())
	return err
}

func sortedKeys[V any](m map[metricKey]V) []metricKey {
	keys := make([]metricKey, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b metricKey) int {
		return strings.Compare(a.module+"\x00"+a.name+"\x00"+a.op, b.module+"\x00"+b.name+"\x00"+b.op)
	})
	return keys
}
