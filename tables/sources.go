package tables

import (
	"strconv"

	"github.com/cilium/statedb"
	"github.com/cilium/statedb/index"

	"github.com/lbstate/lbstate/lb"
)

// SourcesTableName lists the sources registered in the agent's process
// (lb.RegisterSource) with their priorities: rows carry a source by name,
// and a reader in another process (lbctl) registers these before it
// decodes rows that carry an embedder's own.
const SourcesTableName = "sources"

// RegisteredSource is one registered source.
type RegisteredSource struct {
	Name     string `json:"name" yaml:"name"`
	Priority uint16 `json:"priority" yaml:"priority"`
}

func (s *RegisteredSource) TableHeader() []string { return []string{"Name", "Priority"} }

func (s *RegisteredSource) TableRow() []string {
	return []string{s.Name, strconv.Itoa(int(s.Priority))}
}

// RegisteredSourceByName is the primary index of the sources table.
var RegisteredSourceByName = statedb.Index[*RegisteredSource, string]{
	Name:       "name",
	FromObject: func(s *RegisteredSource) index.KeySet { return index.NewKeySet(index.String(s.Name)) },
	FromKey:    index.String,
	FromString: index.FromString,
	Unique:     true,
}

// listSources brings the sources table up to date with the process's
// registry. The Writer calls it when it is created and whenever a source
// registers its initializer, which every source does before it writes.
func (w *Writer) listSources() {
	txn := w.db.WriteTxn(w.t.sources)
	defer txn.Commit()
	for _, src := range lb.Sources() {
		row := &RegisteredSource{Name: src.String(), Priority: src.Priority()}
		if old, _, found := w.t.sources.Get(txn, RegisteredSourceByName.Query(row.Name)); found && *old == *row {
			continue
		}
		if _, _, err := w.t.sources.Insert(txn, row); err != nil {
			w.log.Error("Listing the registered sources", "source", row.Name, "error", err)
		}
	}
}

// RegisterSources registers in this process the sources a sources table
// lists (another process's, read through its API), so that rows carrying
// them decode here; a conflict with a source registered here is an
// error naming both.
func RegisterSources(rows []*RegisteredSource) error {
	for _, r := range rows {
		if _, err := lb.RegisterSource(r.Name, r.Priority); err != nil {
			return err
		}
	}
	return nil
}
