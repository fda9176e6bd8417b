package routes

import (
	"github.com/cilium/hive/cell"
	"github.com/cilium/statedb"
	"github.com/cilium/statedb/index"
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

func (s *Status) id() string {
	return s.Source.String() + "/" + s.Kind + "/" + s.Namespace + "/" + s.Name
}

// NewStatusTable creates the status table in db.
func NewStatusTable(db *statedb.DB) (statedb.RWTable[*Status], error) {
	return statedb.NewTable(db, StatusTableName, StatusByKey)
}

// Cell provides the status table (statedb.RWTable[*Status] for the
// sources that read routes, statedb.Table[*Status] for readers). Without
// it the sources apply routes all the same and keep no status.
var Cell = cell.Module(
	"route-status",
	"The status of traffic-split routes",

	cell.Provide(
		NewStatusTable,
		func(t statedb.RWTable[*Status]) statedb.Table[*Status] { return t },
	),
)
