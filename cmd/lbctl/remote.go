package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"

	"github.com/cilium/statedb"
	"github.com/spf13/pflag"

	"github.com/lbstate/lbstate/lb"
	"github.com/lbstate/lbstate/tables"
)

// defaultAPI is where the example agent serves its API (its --api-addr).
var defaultAPI = "http://127.0.0.1:9811"

// startAgent is how to start an agent to look at.
const startAgent = "go run ./examples/agent --manifests examples/demo"

// agentURL parses --api: the agent's base URL, under which it serves
// StateDB at /statedb and the maps' dump at /maps. A bare host:port (its
// --api-addr) means http, and a URL ending in /statedb, which is what
// --api once was, means its base.
func agentURL(api string) (*url.URL, error) {
	raw := api
	if !strings.Contains(raw, "://") {
		raw = "http://" + raw
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("--api %q: want the agent's URL, such as %s", api, defaultAPI)
	}
	u.Path = strings.TrimSuffix(strings.TrimSuffix(u.Path, "/"), "/statedb")
	return u, nil
}

// remoteTableCmd lists (and with --watch, follows) one table of a running
// agent, in the order of its primary index.
func remoteTableCmd[Obj row](table string) func(args []string, stdout, stderr io.Writer) error {
	usage := fmt.Sprintf("Usage: lbctl %s [flags]\n\nLists the %s table of a running agent.", table, table)
	return remoteListCmd[Obj](table, usage, table, nil)
}

// remoteListCmd is the command name listing the rows of table that keep
// accepts (all, and then --watch follows them, with a nil keep), in the
// order of its primary index.
func remoteListCmd[Obj row](name, usage, table string, keep func(Obj) bool) func(args []string, stdout, stderr io.Writer) error {
	return func(args []string, stdout, stderr io.Writer) error {
		watch := new(bool)
		c, output, err := agentCommand(name, usage, args, stderr, func(fs *pflag.FlagSet) {
			if keep == nil { // a filtered watch would miss rows leaving the filter
				watch = fs.BoolP("watch", "w", false, "Follow changes: print each changed row (deleted rows with '-')")
			}
		})
		if err != nil {
			return err
		}
		if *watch {
			return watchTable[Obj](c, table, stdout)
		}
		return listTable(c, table, newRowPrinter[Obj](stdout, output), keep)
	}
}

// agentCommand parses the flags of a command that reads a running agent
// (--api, -o, --timeout, and those more adds) and returns a client of the
// agent and the output format.
func agentCommand(name, usage string, args []string, stderr io.Writer, more func(*pflag.FlagSet)) (*agentClient, string, error) {
	fs := newFlags(name, usage, stderr)
	api := fs.String("api", defaultAPI, "The agent's HTTP API (its --api-addr)")
	dump := addDumpFlag(fs)
	output := addOutputFlag(fs, "aligned columns")
	if more != nil {
		more(fs)
	}
	timeout := addTimeoutFlag(fs)
	if err := parseFlags(fs, args); err != nil {
		return nil, "", err
	}
	if *dump != "" {
		if fs.Changed("api") {
			return nil, "", errors.New("give --api or --dump, not both")
		}
		c, err := dumpClient(*dump)
		return c, output.format, err
	}
	c, err := newAgentClient(*api, *timeout)
	return c, output.format, err
}

// listTable prints the rows of table (in its primary index's order) as
// they arrive, those keep accepts (all with a nil keep): lbctl holds one
// row at a time, or one block of a table's.
func listTable[Obj row](c *agentClient, table string, p *rowPrinter[Obj], keep func(Obj) bool) error {
	err := eachRow(c, table, func(o Obj) error {
		if keep != nil && !keep(o) {
			return nil
		}
		return p.print(o)
	})
	if err != nil {
		return err
	}
	return p.end()
}

// learnSources registers here the sources the agent lists (its sources
// table), once per client, before the first rows are decoded: rows name
// their source, and an embedder's agent has sources of its own. An agent
// that lists none (an older one) is read with the built-in sources; one
// out of reach, or silent, is reported as any request would report it.
func (c *agentClient) learnSources() error {
	if c.learned {
		return nil
	}
	c.learned = true
	var rows []*tables.RegisteredSource
	err := eachRow(c, tables.SourcesTableName, func(r *tables.RegisteredSource) error {
		if r.Name != "" { // not a source: a server that answers any query alike
			rows = append(rows, r)
		}
		return nil
	})
	switch {
	case errors.As(err, new(*noAgentError)), errors.As(err, new(*silentError)):
		return err
	case err != nil:
		return nil
	}
	if err := tables.RegisterSources(rows); err != nil {
		return fmt.Errorf("the agent at %s: %w", c.base, err)
	}
	return nil
}

// eachRow calls fn with each row of table, in its primary index's order,
// as they arrive. It reads the API's rows (api.RowsPath), which take a
// query in text: StateDB's own queries take index keys in bytes, which
// an agent built with another version of the index may read otherwise,
// and answer nothing where rows exist.
func eachRow[Obj any](c *agentClient, table string, fn func(Obj) error) error {
	if err := c.learnSources(); err != nil {
		return err
	}
	a, err := c.get(rowsPath+table, nil, nil)
	if err != nil {
		return err
	}
	defer a.Close()
	dec := json.NewDecoder(a)
	for {
		var res struct {
			Obj Obj    `json:"obj"`
			Err string `json:"err"`
		}
		if err := dec.Decode(&res); err == io.EOF {
			return nil
		} else if err != nil {
			return fmt.Errorf("reading the %s table from the agent at %s: %w", table, c.base, err)
		}
		if res.Err != "" {
			return fmt.Errorf("the agent at %s: %s", c.base, res.Err)
		}
		if err := fn(res.Obj); err != nil {
			return err
		}
	}
}

func watchTable[Obj row](c *agentClient, table string, w io.Writer) error {
	if err := c.learnSources(); err != nil {
		return err
	}
	a, err := c.get("statedb/changes/"+table, nil, nil)
	if err != nil {
		return err
	}
	defer a.Close()
	a.stream()
	dec := json.NewDecoder(a)
	for {
		var change statedb.Change[Obj]
		if err := dec.Decode(&change); err == io.EOF {
			break
		} else if err != nil {
			return fmt.Errorf("watching the agent at %s: %w (run again once it is back)", c.base, err)
		}
		if change.Revision == 0 {
			continue // a keep-alive
		}
		mark := " "
		if change.Deleted {
			mark = "-"
		}
		if _, err := fmt.Fprintf(w, "%s %s\n", mark, strings.Join(change.Object.TableRow(), "  ")); err != nil {
			return err
		}
	}
	return fmt.Errorf("the agent at %s ended the watch (run again once it is back)", c.base)
}

var (
	servicesCmd  = remoteTableCmd[*lb.Service](tables.ServicesTableName)
	frontendsCmd = remoteTableCmd[*lb.Frontend](tables.FrontendsTableName)
	backendsCmd  = remoteTableCmd[*lb.Backend](tables.BackendsTableName)
)
