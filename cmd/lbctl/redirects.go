package main

import (
	"io"
	"slices"

	"github.com/lbstate/lbstate/lb"
	"github.com/lbstate/lbstate/reflectors/redirectpolicy"
	"github.com/lbstate/lbstate/tables"
)

const redirectsUsage = `Usage: lbctl redirects [flags]

Lists a running agent's local redirect policies: what each redirects on
this node (FRONTEND as written; REDIRECTS, the frontends it redirects now),
the pods it selects (with their state when not active), and WHY it
redirects nothing to a ready pod (no pod, no such Service, an older policy
on the same Service, an address a Service owns, an invalid policy).`

// redirectsCmd joins the agent's local-redirect-policies table with its
// frontends (redirectpolicy.Describe).
func redirectsCmd(args []string, stdout, stderr io.Writer) error {
	c, output, err := agentCommand("redirects", redirectsUsage, args, stderr, nil)
	if err != nil {
		return err
	}
	var policies []*redirectpolicy.Status
	services := map[lb.ServiceName]bool{}
	addrs := map[lb.L3n4Addr]bool{}
	err = eachRow(c, redirectpolicy.TableName,
		func(st *redirectpolicy.Status) error {
			policies = append(policies, st)
			services[st.Service], services[st.Target] = true, true
			for _, a := range st.Addresses {
				addrs[a] = true
			}
			return nil
		})
	if err != nil {
		return err
	}
	// Only the frontends the policies name are kept.
	var frontends []*lb.Frontend
	err = eachRow(c, tables.FrontendsTableName,
		func(fe *lb.Frontend) error {
			if services[fe.Service] || addrs[fe.Address] {
				frontends = append(frontends, fe)
			}
			return nil
		})
	if err != nil {
		return err
	}
	p := newRowPrinter[redirectpolicy.Report](stdout, output)
	for _, rep := range redirectpolicy.Describe(slices.Values(policies), slices.Values(frontends)) {
		if err := p.print(rep); err != nil {
			return err
		}
	}
	return p.end()
}
