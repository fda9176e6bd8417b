package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"

	"github.com/cilium/statedb"
)

// checkQueries answers a StateDB query (GET /query) for an index its table
// does not have with 400 and the error, before StateDB's handler sees it:
// that one panics on it.
func checkQueries(db *statedb.DB, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/query" {
			h.ServeHTTP(w, r)
			return
		}
		body, err := io.ReadAll(r.Body)
		if err != nil {
			code := http.StatusBadRequest
			if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
				code = http.StatusRequestEntityTooLarge
			}
			answerQuery(w, code, err)
			return
		}
		var req statedb.QueryRequest
		if json.Unmarshal(body, &req) == nil { // else StateDB says what is wrong
			if err := checkIndex(db, req.Table, req.Index); err != nil {
				answerQuery(w, http.StatusBadRequest, err)
				return
			}
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		h.ServeHTTP(w, r)
	})
}

// checkIndex says what is wrong with querying index of table.
func checkIndex(db *statedb.DB, table, index string) error {
	meta := db.GetTable(db.ReadTxn(), table)
	if meta == nil {
		return nil // StateDB answers 404
	}
	switch index {
	case statedb.RevisionIndex, statedb.GraveyardIndex, statedb.GraveyardRevisionIndex:
		return nil
	}
	names := meta.Indexes()
	if slices.Contains(names, index) {
		return nil
	}
	return fmt.Errorf("table %q has no index %q (it has %s)", table, index, strings.Join(names, ", "))
}

// answerQuery answers a query with an error, as StateDB does.
func answerQuery(w http.ResponseWriter, code int, err error) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(statedb.QueryResponse{Err: err.Error()})
}
