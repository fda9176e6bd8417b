package k8s

import (
	"log/slog"
	"testing"

	"github.com/lbstate/lbstate/lb"
	"github.com/lbstate/lbstate/reflectors"
	"github.com/lbstate/lbstate/tables"
)

// newTestReflector returns a reflector declaring as the k8s source into w,
// logging nowhere.
func newTestReflector(tb testing.TB, cfg Config, w *tables.Writer) *Reflector {
	tb.Helper()
	src, err := reflectors.NewSource(w, lb.SourceK8s, slog.New(slog.DiscardHandler), nil)
	if err != nil {
		tb.Fatal(err)
	}
	r, err := NewReflector(cfg, src, lb.SourceK8s)
	if err != nil {
		tb.Fatal(err)
	}
	return r
}
