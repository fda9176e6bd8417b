package metrics

import (
	"time"

	"github.com/cilium/statedb"
	"github.com/prometheus/client_golang/prometheus"
)

// tableMetrics reports StateDB's per-table and per-transaction figures
// (statedb.Metrics) as lbstate_table_* and lbstate_write_txn_*.
type tableMetrics struct {
	objects, graveyard, revision, trackers, lowWatermark *prometheus.GaugeVec
	cleaning                                             *prometheus.HistogramVec
	txnDuration, txnAcquisition, tableAcquisition        *prometheus.HistogramVec
}

func newTableMetrics(reg prometheus.Registerer) statedb.Metrics {
	gauge := func(name, help string) *prometheus.GaugeVec {
		return Register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: Namespace, Subsystem: "table", Name: name, Help: help}, []string{"table"}))
	}
	histogram := func(subsystem, name, help, label string) *prometheus.HistogramVec {
		return Register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: Namespace, Subsystem: subsystem, Name: name, Help: help,
			Buckets: prometheus.ExponentialBuckets(1e-6, 4, 12), // 1µs to ~4s
		}, []string{label}))
	}
	return &tableMetrics{
		objects:          gauge("objects", "Objects in the table."),
		graveyard:        gauge("graveyard_objects", "Deleted objects kept until every delete tracker has seen them."),
		revision:         gauge("revision", "The table's current revision."),
		trackers:         gauge("delete_trackers", "Delete trackers (watchers of deletions, such as the reconciler) of the table."),
		lowWatermark:     gauge("graveyard_low_watermark", "The lowest revision every delete tracker has processed."),
		cleaning:         histogram("table", "graveyard_cleaning_duration_seconds", "Time spent removing processed objects from the graveyard.", "table"),
		txnDuration:      histogram("write_txn", "duration_seconds", "Time write transactions held their tables, by the handle that wrote.", "handle"),
		txnAcquisition:   histogram("write_txn", "acquisition_seconds", "Time write transactions waited for their tables, by the handle that wrote.", "handle"),
		tableAcquisition: histogram("write_txn", "table_acquisition_seconds", "Time write transactions waited for each table.", "table"),
	}
}

func (m *tableMetrics) WriteTxnTableAcquisition(_ string, table string, d time.Duration) {
	m.tableAcquisition.WithLabelValues(table).Observe(d.Seconds())
}

func (m *tableMetrics) WriteTxnTotalAcquisition(handle string, _ []string, d time.Duration) {
	m.txnAcquisition.WithLabelValues(handle).Observe(d.Seconds())
}

func (m *tableMetrics) WriteTxnDuration(handle string, _ []string, d time.Duration) {
	m.txnDuration.WithLabelValues(handle).Observe(d.Seconds())
}

func (m *tableMetrics) GraveyardLowWatermark(table string, rev statedb.Revision) {
	m.lowWatermark.WithLabelValues(table).Set(float64(rev))
}

func (m *tableMetrics) GraveyardCleaningDuration(table string, d time.Duration) {
	m.cleaning.WithLabelValues(table).Observe(d.Seconds())
}

func (m *tableMetrics) GraveyardObjectCount(table string, n int) {
	m.graveyard.WithLabelValues(table).Set(float64(n))
}

func (m *tableMetrics) ObjectCount(table string, n int) {
	m.objects.WithLabelValues(table).Set(float64(n))
}

func (m *tableMetrics) DeleteTrackerCount(table string, n int) {
	m.trackers.WithLabelValues(table).Set(float64(n))
}

func (m *tableMetrics) Revision(table string, rev statedb.Revision) {
	m.revision.WithLabelValues(table).Set(float64(rev))
}
