package reflectors

import (
	"errors"
	"log/slog"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/lbstate/lbstate/tables"
)

// Reporter logs and counts bad input as a source does
// (lbstate_source_errors_total{source=NAME}), for a feed that writes
// nothing itself but reads what users give: a manifests directory reports
// its unreadable files and invalid documents through one named as the
// sources it feeds, so that they count where that feed's other errors
// do.
type Reporter struct {
	log         *slog.Logger
	errors      atomic.Uint64
	errorsTotal prometheus.Counter
}

// NewReporter returns a Reporter named name, with its counter in reg
// (nil: unregistered).
func NewReporter(name string, log *slog.Logger, reg prometheus.Registerer) *Reporter {
	return &Reporter{log: log.With("source", name), errorsTotal: sourceMetrics(reg).errors.WithLabelValues(name)}
}

// Reject logs (at WARN) and counts one piece of invalid input
// (errors.Is(err, tables.ErrInvalid)), as Source.Reject does.
func (r *Reporter) Reject(err error) bool {
	if err == nil {
		return false
	}
	if !errors.Is(err, tables.ErrInvalid) {
		r.log.Error("BUG: Reject of an error that is not invalid input (the source must abort its transaction and return it)", "error", err)
		return false
	}
	r.errors.Add(1)
	r.errorsTotal.Inc()
	r.log.Warn("Object rejected", "error", err)
	return true
}

// Errors returns how many times Reject counted an error.
func (r *Reporter) Errors() uint64 { return r.errors.Load() }

// Log is the reporter's logger (it carries source=NAME).
func (r *Reporter) Log() *slog.Logger { return r.log }
