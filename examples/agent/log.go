package main

import (
	"context"
	"io"
	"log/slog"
)

// hiveChatter are hive's INFO lines for every constructor, hook and job:
// an operator needs the agent's own lines (maps used, sources synced,
// errors), so these go to DEBUG.
var hiveChatter = map[string]bool{
	"Invoked":             true,
	"Start hook executed": true,
	"Stop hook executed":  true,
	"Job started":         true,
	"Job stopped":         true,
	"Starting hive":       true,
	"Stopping hive":       true,
}

// newLogger returns the agent's text logger: INFO and up, hive's chatter
// at DEBUG; everything with debug.
func newLogger(w io.Writer, debug bool) *slog.Logger {
	level := slog.LevelInfo
	if debug {
		level = slog.LevelDebug
	}
	return slog.New(demoteHandler{slog.NewTextHandler(w, &slog.HandlerOptions{Level: level})})
}

// demoteHandler logs hiveChatter at DEBUG.
type demoteHandler struct{ slog.Handler }

func (h demoteHandler) Handle(ctx context.Context, r slog.Record) error {
	if r.Level == slog.LevelInfo && hiveChatter[r.Message] {
		if !h.Handler.Enabled(ctx, slog.LevelDebug) {
			return nil
		}
		r.Level = slog.LevelDebug
	}
	return h.Handler.Handle(ctx, r)
}

func (h demoteHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return demoteHandler{h.Handler.WithAttrs(attrs)}
}

func (h demoteHandler) WithGroup(name string) slog.Handler {
	return demoteHandler{h.Handler.WithGroup(name)}
}
