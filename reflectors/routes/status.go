package routes

import (
	"github.com/cilium/statedb"
	"github.com/cilium/statedb/index"

	"github.com/lbstate/lbstate/lb"
)

// StatusTableName is the table of route statuses (what `lbctl routes`
// lists): one row per route or TrafficSplit a source holds.
const StatusTableName = "routes"

// StatusByKey is the primary index of the status table: source, kind,
// namespace and name.
var StatusByKey = statedb.Index[*Status, string]{
	Name:       "key",
	FromObject: func(s *Status) index.KeySet { return index.NewKeySet(index.String(s.id())) },
	FromKey:    index.String,
	FromString: index.FromString,
	Unique:     true,
}

func (s *Status) id() string { return StatusID(s.Source, s.Key) }

// StatusID is the StatusByKey key of the row of src's object key.
func StatusID(src lb.Source, key Key) string {
	return src.String() + "/" + key.Kind + "/" + key.Namespace + "/" + key.Name
}

// NewStatusTable creates the status table in db.
func NewStatusTable(db *statedb.DB) (statedb.RWTable[*Status], error) {
	return statedb.NewTable(db, StatusTableName, StatusByKey)
}
