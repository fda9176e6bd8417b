package api

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"runtime"

	"github.com/cilium/statedb"
)

// JSONAppender is a row that encodes itself: AppendJSON appends the
// row's compact JSON, the bytes json.Marshal writes of it. The dump
// writes such rows without json.Marshal's reflection and without its
// second pass over the bytes (encoding/json validates and compacts what
// a MarshalJSON returns), which for a million backends was most of the
// dump's time. lb.Backend is one.
type JSONAppender interface {
	AppendJSON(b []byte) []byte
}

// dumpHandler serves GET /dump (under StateDBPath): every table, from one
// read transaction, in the layout of StateDB's own dump (ReadTxn.WriteJSON:
// a table a member, a row a line), which lbctl dump splits by lines. The
// rows are encoded by GOMAXPROCS workers, in chunks written in order, so
// a dump of a million rows uses the agent's cores and holds only the
// chunks in flight.
func dumpHandler(db *statedb.DB) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !getOnly(w, r) {
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		if r.Method == http.MethodHead {
			return
		}
		if err := writeTables(r.Context(), w, db, db.ReadTxn()); err != nil {
			panic(err) // as StateDB's handler does: Wrap logs it, the connection is cut
		}
	})
}

// dumpBufferBytes is what the dump writes to its client at a time.
const dumpBufferBytes = 256 << 10

// dumpChunkRows is how many rows a worker encodes at a time.
const dumpChunkRows = 512

// dumpChunk is a run of rows of one table, encoded by a worker.
type dumpChunk struct {
	rows []any
	out  []byte
	done chan struct{}
}

// writeTables writes every table of txn as StateDB's WriteJSON does. It
// stops walking and encoding rows when ctx ends (the client went away)
// or a write fails, rather than holding the read transaction, and the
// cores, for the rest of a dump nobody reads.
func writeTables(ctx context.Context, w io.Writer, db *statedb.DB, txn statedb.ReadTxn) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	workers := max(1, runtime.GOMAXPROCS(0))
	todo := make(chan *dumpChunk, 2*workers)
	inOrder := make(chan *dumpChunk, 2*workers)
	for range workers {
		go func() {
			for c := range todo {
				c.out = encodeRows(c.out[:0], c.rows)
				close(c.done)
			}
		}()
	}
	// The producer walks the tables and hands out chunks; the writer
	// below writes them in the order they were made.
	tables := db.GetTables(txn)
	go func() {
		defer close(inOrder)
		defer close(todo)
		for _, meta := range tables {
			var c *dumpChunk
			for row := range (statedb.AnyTable{Meta: meta}).All(txn) {
				if ctx.Err() != nil {
					return
				}
				if c == nil {
					c = &dumpChunk{rows: make([]any, 0, dumpChunkRows), done: make(chan struct{})}
				}
				if c.rows = append(c.rows, row); len(c.rows) == dumpChunkRows {
					inOrder <- c
					todo <- c
					c = nil
				}
			}
			if c != nil {
				inOrder <- c
				todo <- c
			}
			inOrder <- nil // the table's end
		}
	}()
	bw := bufio.NewWriterSize(w, dumpBufferBytes)
	var err error
	write := func(s string) {
		if err == nil {
			err = ctx.Err()
		}
		if err == nil {
			_, err = bw.WriteString(s)
		}
		if err != nil {
			cancel()
		}
	}
	write("{\n")
	for i, meta := range tables {
		if i > 0 {
			write(",\n")
		}
		write("  \"" + meta.Name() + "\": [\n")
		first := true
		for c := range inOrder {
			if c == nil {
				break
			}
			<-c.done
			if !first {
				write(",\n")
			}
			first = false
			if write(""); err == nil {
				_, err = bw.Write(c.out)
			}
		}
		if !first {
			write("\n")
		}
		write("  ]")
	}
	if len(tables) > 0 {
		write("\n")
	}
	write("}\n")
	for range inOrder { // the producer's chunks, when it stopped early
	}
	if err != nil {
		return err
	}
	return bw.Flush()
}

// encodeRows appends rows, each indented and separated as in StateDB's
// dump ("    ROW", ",\n" between rows).
func encodeRows(out []byte, rows []any) []byte {
	for i, row := range rows {
		if i > 0 {
			out = append(out, ",\n"...)
		}
		out = append(out, "    "...)
		out = appendRow(out, row)
	}
	return out
}

// appendRow appends one row's JSON, as StateDB's dump writes it: an error
// or a panic of its encoding becomes a string saying so.
func appendRow(out []byte, row any) (res []byte) {
	// A panic here is in a worker goroutine, which nothing else recovers:
	// it must not take the agent down.
	defer func() {
		if r := recover(); r != nil {
			res = fmt.Appendf(out, "\"panic marshalling JSON: %.32s\"", r)
		}
	}()
	if a, ok := row.(JSONAppender); ok {
		return a.AppendJSON(out)
	}
	js, err := json.Marshal(row)
	if err != nil {
		return append(out, "\"marshalling error: "+err.Error()+"\""...)
	}
	return append(out, js...)
}

// getOnly answers a request that is neither GET nor HEAD with 405, and
// says whether the request is one.
func getOnly(w http.ResponseWriter, r *http.Request) bool {
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		return true
	}
	w.Header().Set("Allow", "GET, HEAD")
	http.Error(w, "use GET", http.StatusMethodNotAllowed)
	return false
}
