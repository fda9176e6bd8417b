package api

import (
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"
)

// Limits bound what a client of the API can make the agent hold, and for
// how long: any local user may connect. Wrap puts other handlers of the
// same server (the agent's /metrics) within them too.
//
// There is no server-wide WriteTimeout, because a watch
// (/statedb/changes/TABLE, lbctl --watch) is one response that lasts as
// long as the user wants. Instead, each request gets deadlines of its
// own through http.ResponseController: a plain request must be read and
// answered within RequestTimeout (a dump holds its snapshot of the tables
// that long at most), and a stream must get each write out within
// StreamWriteTimeout (StateDB sends a keep-alive every 30 s), so a client
// that stops reading is cut off instead of pinning the change tracker.
type Limits struct {
	RequestTimeout     time.Duration // a plain request, read and answered
	StreamWriteTimeout time.Duration // each write of a stream
	MaxBodyBytes       int64         // a request's body (a query's is ~100 bytes)
	MaxRequests        int           // plain requests in flight; more get 503
	MaxStreams         int           // streams open; more get 503
	MaxMaglevTables    int           // maglev=ID parameters of one maps request
}

// DefaultLimits are the example agent's, and what Register and Handler
// apply.
var DefaultLimits = Limits{
	RequestTimeout:     time.Minute,
	StreamWriteTimeout: time.Minute,
	MaxBodyBytes:       64 << 10,
	MaxRequests:        16,
	MaxStreams:         16,
	MaxMaglevTables:    16,
}

// isStream says whether a request is answered by a stream.
func isStream(r *http.Request) bool { return strings.HasPrefix(r.URL.Path, StateDBPath+"changes/") }

// Wrap wraps h with the limits, and turns a handler's panic (StateDB's
// handlers panic when a write fails, e.g. when the client went away) into
// one log line: a 500 when nothing was answered yet, else a cut
// connection.
func (l Limits) Wrap(log *slog.Logger, h http.Handler) http.Handler {
	requests, streams := make(chan struct{}, l.MaxRequests), make(chan struct{}, l.MaxStreams)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		stream := isStream(r)
		slots := requests
		if stream {
			slots = streams
		}
		select {
		case slots <- struct{}{}:
			defer func() { <-slots }()
		default:
			w.Header().Set("Retry-After", "1")
			http.Error(w, fmt.Sprintf("too many requests in flight (at most %d)", cap(slots)), http.StatusServiceUnavailable)
			return
		}
		if n := len(r.URL.Query()["maglev"]); n > l.MaxMaglevTables {
			http.Error(w, fmt.Sprintf("%d maglev tables asked for: at most %d per request", n, l.MaxMaglevTables), http.StatusBadRequest)
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, l.MaxBodyBytes)
		aw := &apiWriter{ResponseWriter: w, rc: http.NewResponseController(w)}
		if stream {
			aw.writeTimeout = l.StreamWriteTimeout
		} else {
			deadline := time.Now().Add(l.RequestTimeout)
			aw.rc.SetReadDeadline(deadline)
			aw.rc.SetWriteDeadline(deadline)
		}
		defer aw.recover(log, r)
		h.ServeHTTP(aw, r)
	})
}

// apiWriter is a ResponseWriter that remembers whether it answered and,
// on a stream, gives each write writeTimeout to get out.
type apiWriter struct {
	http.ResponseWriter
	rc           *http.ResponseController
	writeTimeout time.Duration // 0: the request's deadline applies
	answered     bool
}

func (w *apiWriter) WriteHeader(code int) {
	w.answered = true
	w.ResponseWriter.WriteHeader(code)
}

func (w *apiWriter) Write(b []byte) (int, error) {
	w.answered = true
	w.extend()
	return w.ResponseWriter.Write(b)
}

// Flush is what StateDB's watch needs (it asserts http.Flusher).
func (w *apiWriter) Flush() {
	w.extend()
	w.rc.Flush()
}

// Unwrap lets http.ResponseController reach the connection.
func (w *apiWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *apiWriter) extend() {
	if w.writeTimeout > 0 {
		w.rc.SetWriteDeadline(time.Now().Add(w.writeTimeout))
	}
}

// recover ends a request whose handler panicked with one log line, not
// net/http's stack trace.
func (w *apiWriter) recover(log *slog.Logger, r *http.Request) {
	v := recover()
	switch {
	case v == nil:
	case v == http.ErrAbortHandler:
		panic(v)
	case w.answered:
		// Writing the answer failed: the client went away, or was too
		// slow.
		log.Debug("API response cut off", "path", r.URL.Path, "error", v)
		panic(http.ErrAbortHandler) // closes the connection, quietly
	default:
		log.Warn("API request failed", "path", r.URL.Path, "error", v)
		http.Error(w.ResponseWriter, fmt.Sprintf("internal error: %v", v), http.StatusInternalServerError)
	}
}
