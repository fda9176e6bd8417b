package bpf

import (
	"fmt"
	"net/http"
	"strconv"
)

// DumpWithTables is what DumpHandler serves when asked for Maglev tables:
// the dump, plus the full tables that the dump only counts, by rev-NAT ID.
// Without tables its JSON is exactly the dump's.
type DumpWithTables struct {
	Dump
	MaglevTables map[uint32][]uint32 `json:"maglevTables,omitempty"`
}

// dumpAttempts bounds how often DumpHandler re-reads maps that change
// under it.
const dumpAttempts = 3

// DumpHandler serves GET requests with the dump of m as JSON (the format
// of Dump.WriteJSON), so that a tool can read an agent's maps when it
// cannot open them: in-memory maps, or pinned maps it lacks the privileges
// for. The query parameter maglev=ID (repeatable) asks for the full Maglev
// tables of those rev-NAT IDs too, as a DumpWithTables: what finding one
// flow's backend takes. An ID without a table is left out.
func DumpHandler(m *Maps) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "use GET", http.StatusMethodNotAllowed)
			return
		}
		var ids []uint32
		for _, s := range r.URL.Query()["maglev"] {
			id, err := strconv.ParseUint(s, 10, 32)
			if err != nil {
				http.Error(w, fmt.Sprintf("maglev=%q: want a rev-NAT ID", s), http.StatusBadRequest)
				return
			}
			ids = append(ids, uint32(id))
		}
		d, tables, err := takeDump(m, ids)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		// Streamed: the encoding cannot fail past here but for the
		// connection, and a dump of a million entries is not held twice.
		d.writeJSON(w, tables)
	})
}

// takeDump reads m, with the Maglev tables of ids if any. The tables are
// read after the dump, so each is checked against its entry and the
// whole read repeated when the two differ.
func takeDump(m *Maps, ids []uint32) (*Dump, map[uint32][]uint32, error) {
	for attempt := 1; ; attempt++ {
		d, err := TakeDump(m)
		if err != nil || len(ids) == 0 {
			return d, nil, err
		}
		tables := map[uint32][]uint32{}
		consistent, err := readTables(m, d, ids, tables)
		if err != nil {
			return nil, nil, err
		}
		if consistent {
			return d, tables, nil
		}
		if attempt == dumpAttempts {
			return nil, nil, fmt.Errorf("the Maglev tables changed during each of %d reads; try again", dumpAttempts)
		}
	}
}

// readTables reads the tables of ids into tables and reports whether each
// matches its entry in d.
func readTables(m *Maps, d *Dump, ids []uint32, tables map[uint32][]uint32) (bool, error) {
	entries := make(map[uint32]MaglevEntry, len(d.Maglev))
	for _, e := range d.Maglev {
		entries[e.RevNatID] = e
	}
	for _, id := range ids {
		table, ok, err := m.Maglev.Lookup(id)
		if err != nil {
			return false, err
		}
		e, inDump := entries[id]
		if ok != inDump || (ok && checkMaglevTable(e, table) != nil) {
			return false, nil
		}
		if ok {
			tables[id] = table
		}
	}
	return true, nil
}
