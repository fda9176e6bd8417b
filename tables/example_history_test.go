package tables_test

import (
	"fmt"

	"github.com/cilium/statedb"

	"github.com/lbstate/lbstate/lb"
	"github.com/lbstate/lbstate/tables"
)

// A source says what object it is applying (SetCause, on its
// transaction), and the history of the frontends it changes says so.
func ExampleWriter_SetCause() {
	w, err := tables.New(statedb.New(), nil)
	if err != nil {
		panic(err)
	}
	web := lb.NewServiceName("shop", "web")
	backends := []lb.BackendParams{{Address: lb.MustParseL3n4Addr("10.0.2.7:8080/TCP"), Weight: 100}}
	txn := w.WriteTxn()
	w.UpsertService(txn, lb.ServiceParams{Name: web, Source: lb.SourceK8s,
		Frontends: []lb.FrontendParams{{Address: lb.MustParseL3n4Addr("10.96.0.10:80/TCP"), Type: lb.SVCTypeClusterIP}}})
	txn.Commit()

	txn = w.WriteTxn()
	w.SetCause(txn, &tables.Cause{Source: "k8s", Kind: "EndpointSlice", Namespace: "shop", Name: "web-abc", ResourceVersion: "4711"})
	err = w.SetBackends(txn, web, lb.SourceK8s, backends...)
	if err != nil {
		txn.Abort() // the history drops its entries with the transaction
		panic(err)
	}
	txn.Commit() // and publishes them with it

	recs, _ := w.History().Records(tables.HistoryQuery{Service: web})
	for _, r := range recs {
		fmt.Println(tables.HistoryLine(r))
	}
	// Output:
	// 10.96.0.10:80/TCP created by unknown cause
	// 10.96.0.10:80/TCP changed by k8s EndpointSlice shop/web-abc resourceVersion 4711: +10.0.2.7:8080/TCP weight 100 active
}
