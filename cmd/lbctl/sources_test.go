package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/lbstate/lbstate/api"
	"github.com/lbstate/lbstate/lb"
	"github.com/lbstate/lbstate/tables"
)

var runs int

// An embedder's agent writes rows as sources of its own, which lbctl's
// process has never registered: lbctl learns them from the agent's
// sources table before it decodes the rows. An agent that does not list
// them gets a clear error naming the unknown source.
func TestLbctlDecodesRowsOfTheAgentsOwnSources(t *testing.T) {
	// A name and priority registered in no process but the "agent" (new
	// at each run: a run registers them here).
	runs++
	remoteOnly, priority := fmt.Sprintf("lbctl-agent-only-%d", runs), strconv.Itoa(1000+runs)
	svc := (&lb.Service{Name: lb.NewServiceName("shop", "web")}).WithParams(lb.ServiceParams{
		Name: lb.NewServiceName("shop", "web"), Source: lb.SourceAPI,
		Frontends: []lb.FrontendParams{{Address: lb.MustParseL3n4Addr("10.96.0.7:80/TCP"), Type: lb.SVCTypeClusterIP}},
	})
	row, err := json.Marshal(svc)
	if err != nil {
		t.Fatal(err)
	}
	row = bytes.ReplaceAll(row, []byte(`"source":"api"`), []byte(`"source":"`+remoteOnly+`"`))
	if !bytes.Contains(row, []byte(remoteOnly)) {
		t.Fatalf("no source in the service's JSON: %s", row)
	}
	agent := func(listsSources bool) *httptest.Server {
		return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			table, ok := strings.CutPrefix(r.URL.Path, api.RowsPath)
			if !ok {
				http.NotFound(w, r)
				return
			}
			switch {
			case table == tables.SourcesTableName && listsSources:
				w.Write([]byte(`{"obj":{"name":"` + remoteOnly + `","priority":` + priority + `}}` + "\n"))
			case table == tables.ServicesTableName:
				w.Write([]byte(`{"obj":` + string(row) + "}\n"))
			default:
				w.WriteHeader(http.StatusBadRequest)
				w.Write([]byte(`{"err":"table not found"}`))
			}
		}))
	}

	older := agent(false)
	defer older.Close()
	var stdout, stderr bytes.Buffer
	if code := run([]string{"services", "--api", older.URL}, &stdout, &stderr); code != 1 || !strings.Contains(stderr.String(), `unknown source "`+remoteOnly+`"`) {
		t.Errorf("agent without a sources table: exit %d, stderr %q; want exit 1 naming the unknown source", code, stderr.String())
	}

	current := agent(true)
	defer current.Close()
	stdout.Reset()
	stderr.Reset()
	if code := run([]string{"services", "--api", current.URL}, &stdout, &stderr); code != 0 || !strings.Contains(stdout.String(), remoteOnly) {
		t.Errorf("agent listing its sources: exit %d, stdout %q, stderr %q; want the service declared by %s", code, stdout.String(), stderr.String(), remoteOnly)
	}
}
