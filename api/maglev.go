package api

import (
	"bufio"
	"encoding/json"
	"net/http"

	"github.com/lbstate/lbstate/bpf"
)

// MaglevTablesPath is where the API serves every Maglev table, whole:
// what the maps' dump only counts, and what lbctl dump keeps so that
// lbctl explain --dump finds one flow's backend offline.
const MaglevTablesPath = MapsPath + "/maglev"

// MaglevTable is one line of MaglevTablesPath: the lookup table of a
// rev-NAT ID, as lb_maglev holds it.
type MaglevTable struct {
	RevNatID uint32   `json:"revNatID"`
	Table    []uint32 `json:"table"`
}

// maglevTables streams the tables, one JSON line each, as the map
// iterates: the agent holds one table at a time, whatever their number.
// The tables are read after (or before) a dump of the other maps, so a
// reader checks each against the dump's entry (bpf.MaglevEntry.Matches)
// and reads both again when they differ.
func maglevTables(m *bpf.Maps) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !getOnly(w, r) {
			return
		}
		w.Header().Set("Content-Type", "application/jsonl")
		buf := bufio.NewWriterSize(w, 64<<10)
		enc := json.NewEncoder(buf)
		var werr error
		err := m.Maglev.Iterate(func(id uint32, table []uint32) bool {
			werr = enc.Encode(MaglevTable{RevNatID: id, Table: table})
			return werr == nil
		})
		if err == nil {
			err = werr
		}
		if err == nil {
			err = buf.Flush()
		}
		if err != nil {
			// Part of the answer may be out: cut the connection, so
			// that the reader sees a truncated stream, not a short one.
			panic(err)
		}
	})
}
