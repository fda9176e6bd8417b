package api

// The rows of a table, found by a query in text that the server turns
// into an index key. StateDB's own /statedb/query takes the key's bytes,
// which only the index that made them can read: a client built with
// another version of the index would send keys this server reads
// differently, and get an empty answer where rows exist. Here the client
// sends what it means (?address=10.96.0.10:53/UDP) and a mismatch is an
// error that says so.

import (
	"encoding/json"
	"fmt"
	"iter"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/cilium/statedb"
)

const (
	// RowsPath is where the API serves a table's rows: GET
	// RowsPath+TABLE lists them all in the order of the primary index,
	// and RowsPath+TABLE?INDEX=KEY those whose INDEX holds KEY, given in
	// text as the db/* script commands take it (?address=10.96.0.10:53/UDP
	// of frontends, ?name=default/dns of services). The answer is
	// StateDB's query answer: one JSON object a line, {"rev":R,"obj":O},
	// or {"err":E} with a status other than 200.
	RowsPath = "/rows/"

	// ReadAPIVersion is the version of the read API this package serves:
	// the paths, the queries they take and the rows they answer with. It
	// changes when one changes in a way an older client would misread.
	ReadAPIVersion = 1
	// VersionHeader carries ReadAPIVersion on every answer of the API; a
	// client that sends it with its request is refused (400, saying
	// which versions) when it speaks another.
	VersionHeader = "Lbstate-Read-Api"
)

// checkVersion answers a request whose VersionHeader names another
// version than ReadAPIVersion with 400, and marks every answer with the
// version.
func checkVersion(h http.Handler) http.Handler {
	served := strconv.Itoa(ReadAPIVersion)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(VersionHeader, served)
		if v := r.Header.Get(VersionHeader); v != "" && v != served {
			answerQuery(w, http.StatusBadRequest, fmt.Errorf(
				"the client speaks lbstate read API version %s, this agent version %s: use the lbctl (or client) of the agent's release", v, served))
			return
		}
		h.ServeHTTP(w, r)
	})
}

// rows serves RowsPath (mounted with it stripped: the path is the table).
func rows(db *statedb.DB) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		txn := db.ReadTxn()
		name := strings.Trim(r.URL.Path, "/")
		meta := db.GetTable(txn, name)
		if meta == nil {
			var names []string
			for _, m := range db.GetTables(txn) {
				names = append(names, m.Name())
			}
			slices.Sort(names)
			answerQuery(w, http.StatusNotFound, fmt.Errorf("no table %q (there are %s)", name, strings.Join(names, ", ")))
			return
		}
		objs, err := queryRows(txn, statedb.AnyTable{Meta: meta}, r.URL.Query())
		if err != nil {
			answerQuery(w, http.StatusBadRequest, fmt.Errorf("table %q: %w", name, err))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		for obj, rev := range objs {
			if err := enc.Encode(statedb.QueryResponse{Rev: uint64(rev), Obj: obj}); err != nil {
				return // the client went away
			}
		}
	})
}

// queryRows returns the rows of t the query asks for: all of them, or
// those of one index key given in text.
func queryRows(txn statedb.ReadTxn, t statedb.AnyTable, query map[string][]string) (objs iter.Seq2[any, statedb.Revision], err error) {
	if len(query) == 0 {
		return t.All(txn), nil
	}
	if len(query) > 1 {
		return nil, fmt.Errorf("query by one index at a time, not %d", len(query))
	}
	var index, key string
	for index = range query {
		key = query[index][0]
	}
	if !slices.Contains(t.Meta.Indexes(), index) {
		return nil, fmt.Errorf("no index %q (it has %s)", index, strings.Join(t.Meta.Indexes(), ", "))
	}
	// StateDB calls an index's FromString without checking that it has
	// one.
	defer func() {
		if recover() != nil {
			objs, err = nil, fmt.Errorf("index %q takes no key in text", index)
		}
	}()
	objs, err = t.List(txn, index, key)
	if err != nil {
		return nil, fmt.Errorf("index %q: key %q: %w", index, key, err)
	}
	return objs, nil
}
