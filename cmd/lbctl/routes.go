package main

import (
	"io"
	"strconv"
	"strings"

	"github.com/lbstate/lbstate/lb"
	"github.com/lbstate/lbstate/reflectors/routes"
	"github.com/lbstate/lbstate/tables"
)

const routesUsage = "Usage: lbctl routes [flags]\n\nLists a running agent's traffic splits (Gateway API routes on Services, SMI TrafficSplits): the parents each applies to, each backend service's share of new flows, the share the datapath rejects (that of backend services that do not resolve: missing, without the port, or without a backend taking new flows), and what is not applied and why."

// routesCmd lists the routes and TrafficSplits the agent's sources hold:
// their parents, each backend service's share, the share rejected on
// each frontend they route (from the frontends table), and what is not
// applied.
func routesCmd(args []string, stdout, stderr io.Writer) error {
	c, output, err := agentCommand("routes", routesUsage, args, stderr, nil)
	if err != nil {
		return err
	}
	rejected := map[string][]RejectedShare{} // by route name
	err = eachRow(c, tables.FrontendsTableName, func(fe *lb.Frontend) error {
		if fe.RoutedBy() != "" && fe.Rejected() > 0 {
			rejected[fe.RoutedBy()] = append(rejected[fe.RoutedBy()], RejectedShare{Frontend: fe.Address.String(), Percent: rejectedPercent(fe)})
		}
		return nil
	})
	if err != nil {
		return err
	}
	p := newRowPrinter[routeRow](stdout, output)
	err = eachRow(c, routes.StatusTableName, func(s *routes.Status) error {
		return p.print(routeRow{Status: s, Rejected: rejected[s.Key.String()]})
	})
	if err != nil {
		return err
	}
	return p.end()
}

// routeRow is a route's status with the share its frontends reject.
type routeRow struct {
	*routes.Status
	Rejected []RejectedShare `json:"rejected,omitempty"`
}

// RejectedShare is the share of a routed frontend's new flows that the
// datapath rejects, in percent.
type RejectedShare struct {
	Frontend string  `json:"frontend"`
	Percent  float64 `json:"percent"`
}

// rejectedPercent is fe's rejected share of new flows, in percent.
func rejectedPercent(fe *lb.Frontend) float64 {
	sum := float64(fe.Rejected())
	for _, b := range fe.Backends {
		sum += float64(b.Weight)
	}
	return 100 * float64(fe.Rejected()) / sum
}

func (r routeRow) TableHeader() []string {
	return []string{"Route", "Source", "Parents", "Shares", "Rejected", "NotApplied"}
}

func (r routeRow) TableRow() []string {
	row := r.Status.TableRow()
	shares := make([]string, len(r.Rejected))
	for i, s := range r.Rejected {
		shares[i] = s.Frontend + " " + strconv.FormatFloat(s.Percent, 'f', 1, 64) + "%"
	}
	return append(row[:4:4], strings.Join(shares, ", "), row[4])
}
