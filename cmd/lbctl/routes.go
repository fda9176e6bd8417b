package main

import (
	"github.com/lbstate/lbstate/reflectors/routes"
)

// routesCmd lists the routes and TrafficSplits the agent's sources hold:
// their parents, each backend service's share, and what is not applied.
var routesCmd = remoteListCmd[*routes.Status]("routes",
	"Usage: lbctl routes [flags]\n\nLists a running agent's traffic splits (Gateway API routes on Services, SMI TrafficSplits): the parents each applies to, each backend service's share of new flows, and what is not applied and why.",
	routes.StatusTableName, routes.StatusByKey.Name, nil, nil)
