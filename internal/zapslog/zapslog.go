// Package zapslog routes the log of a library that logs through zap (the
// etcd client) into the agent's slog.Logger, so that its lines take the
// agent's format, level and destination instead of zap's JSON on stderr.
//
//	cfg := clientv3.Config{Endpoints: eps, Logger: zapslog.New(log.With("logger", "etcd-client"))}
package zapslog

import (
	"context"
	"log/slog"
	"maps"
	"slices"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// New returns a zap logger whose entries go to log: same message, zap's
// level mapped to slog's (DPanic, Panic and Fatal log as errors; zap
// itself still panics or exits after them), fields as attributes.
func New(log *slog.Logger) *zap.Logger {
	return zap.New(&core{h: log.Handler()})
}

// core is a zapcore.Core over a slog.Handler.
type core struct {
	h     slog.Handler
	attrs []slog.Attr // from With, before each entry's own fields
}

var _ zapcore.Core = (*core)(nil)

// Level maps a zap level to slog's.
func Level(l zapcore.Level) slog.Level {
	switch {
	case l <= zapcore.DebugLevel:
		return slog.LevelDebug
	case l == zapcore.InfoLevel:
		return slog.LevelInfo
	case l == zapcore.WarnLevel:
		return slog.LevelWarn
	}
	return slog.LevelError
}

func (c *core) Enabled(l zapcore.Level) bool {
	return c.h.Enabled(context.Background(), Level(l))
}

func (c *core) With(fields []zapcore.Field) zapcore.Core {
	return &core{h: c.h, attrs: append(slices.Clip(c.attrs), attrsOf(fields)...)}
}

func (c *core) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(e.Level) {
		return ce.AddCore(e, c)
	}
	return ce
}

func (c *core) Write(e zapcore.Entry, fields []zapcore.Field) error {
	r := slog.NewRecord(e.Time, Level(e.Level), e.Message, 0)
	if e.LoggerName != "" {
		r.AddAttrs(slog.String("logger", e.LoggerName))
	}
	r.AddAttrs(c.attrs...)
	r.AddAttrs(attrsOf(fields)...)
	return c.h.Handle(context.Background(), r)
}

// Sync has nothing to flush: the handler writes each record itself.
func (c *core) Sync() error { return nil }

// attrsOf encodes fields as attributes, in their order. zap encodes a
// field into a map (an error may give two keys, "error" and
// "errorVerbose"), whose keys are sorted here so that lines do not vary;
// a namespace groups the fields after it. (A namespace given to With
// groups only the fields of that With.)
func attrsOf(fields []zapcore.Field) []slog.Attr {
	if len(fields) == 0 {
		return nil
	}
	attrs := make([]slog.Attr, 0, len(fields))
	for i, f := range fields {
		if f.Type == zapcore.NamespaceType {
			return append(attrs, slog.Attr{Key: f.Key, Value: slog.GroupValue(attrsOf(fields[i+1:])...)})
		}
		enc := zapcore.NewMapObjectEncoder()
		f.AddTo(enc)
		for _, k := range slices.Sorted(maps.Keys(enc.Fields)) {
			attrs = append(attrs, attrOf(k, enc.Fields[k]))
		}
	}
	return attrs
}

// attrOf is one encoded value: an object's map becomes a group.
func attrOf(key string, v any) slog.Attr {
	m, ok := v.(map[string]any)
	if !ok {
		return slog.Any(key, v)
	}
	group := make([]slog.Attr, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		group = append(group, attrOf(k, m[k]))
	}
	return slog.Attr{Key: key, Value: slog.GroupValue(group...)}
}
