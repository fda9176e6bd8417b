package zapslog

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// A zap logger's entries come out of the slog handler as its own lines:
// message, level, the logger's name, With's fields and the entry's, in
// order; entries below the handler's level are dropped before zap
// encodes their fields.
func TestZapEntriesBecomeSlogRecords(t *testing.T) {
	var buf bytes.Buffer
	h := slog.NewTextHandler(&buf, &slog.HandlerOptions{
		Level: slog.LevelInfo,
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		},
	})
	lg := New(slog.New(h).With("module", "clustermesh")).Named("etcd-client").With(zap.String("endpoint", "10.0.0.1:2379"))
	lg.Debug("dropped", zap.Stringer("never", panicker{}))
	lg.Info("connected", zap.Int("attempt", 3), zap.Duration("took", 1500*time.Millisecond))
	lg.Warn("retrying of unary invoker failed", zap.Error(errors.New("context deadline exceeded")),
		zap.Namespace("call"), zap.String("target", "etcd-endpoints://0xc0/10.0.0.1:2379"))
	lg.Error("lost", zap.Strings("endpoints", []string{"a", "b"}))
	want := `level=INFO msg=connected module=clustermesh logger=etcd-client endpoint=10.0.0.1:2379 attempt=3 took=1.5s
level=WARN msg="retrying of unary invoker failed" module=clustermesh logger=etcd-client endpoint=10.0.0.1:2379 error="context deadline exceeded" call.target=etcd-endpoints://0xc0/10.0.0.1:2379
level=ERROR msg=lost module=clustermesh logger=etcd-client endpoint=10.0.0.1:2379 endpoints="[a b]"
`
	if got := buf.String(); got != want {
		t.Errorf("got\n%swant\n%s", got, want)
	}
	if strings.Contains(buf.String(), "{") {
		t.Error("JSON in the log")
	}
}

// panicker fails the test if a dropped entry's field is encoded.
type panicker struct{}

func (panicker) String() string { panic("a field of a dropped entry was encoded") }

func TestZapLevelsMapToSlogLevels(t *testing.T) {
	for zl, want := range map[zapcore.Level]slog.Level{
		zap.DebugLevel: slog.LevelDebug, zap.InfoLevel: slog.LevelInfo, zap.WarnLevel: slog.LevelWarn,
		zap.ErrorLevel: slog.LevelError, zap.DPanicLevel: slog.LevelError, zap.PanicLevel: slog.LevelError, zap.FatalLevel: slog.LevelError,
	} {
		if got := Level(zl); got != want {
			t.Errorf("zap %v: slog %v, want %v", zl, got, want)
		}
	}
}
