package api

import (
	"bufio"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"

	"github.com/lbstate/lbstate/bpf"
)

// AgentPath serves the flags as they are when asked (not when mounted),
// withholds the values of secret flags, and MetricsPath serves the
// gatherer in the text format.
func TestAgentServesFlagsInForceAndRedactsSecrets(t *testing.T) {
	fs := pflag.NewFlagSet("agent", pflag.ContinueOnError)
	fs.String("lb-algorithm", "random", "")
	fs.String("kubeconfig", "", "")
	fs.String("etcd-password", "default-secret", "")
	reg := prometheus.NewRegistry()
	reg.MustRegister(prometheus.NewGauge(prometheus.GaugeOpts{Name: "lbstate_test_gauge", Help: "a gauge"}))
	mux := http.NewServeMux()
	RegisterAgent(mux, slog.New(slog.DiscardHandler), Agent{Version: "v9.9.9", Flags: fs, Gatherer: reg})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	if err := fs.Parse([]string{"--lb-algorithm", "maglev", "--kubeconfig", "/etc/kube.conf", "--etcd-password", "hunter2"}); err != nil {
		t.Fatal(err)
	}
	code, body := get(t, srv.URL+AgentPath)
	if code != http.StatusOK {
		t.Fatalf("%s: %d %s", AgentPath, code, body)
	}
	var info AgentInfo
	if err := json.Unmarshal([]byte(body), &info); err != nil {
		t.Fatal(err)
	}
	flags := map[string]Flag{}
	for _, f := range info.Flags {
		flags[f.Name] = f
	}
	if info.Version != "v9.9.9" || info.Go == "" {
		t.Errorf("version %q, go %q", info.Version, info.Go)
	}
	if f := flags["lb-algorithm"]; f.Value != "maglev" || f.Default != "random" || !f.Changed {
		t.Errorf("lb-algorithm: %+v, want maglev (given), default random", f)
	}
	if f := flags["kubeconfig"]; f.Value != "/etc/kube.conf" {
		t.Errorf("kubeconfig: %+v, want its path", f)
	}
	if f := flags["etcd-password"]; f.Value != redacted || f.Default != redacted || !f.Redacted {
		t.Errorf("etcd-password: %+v, want redacted", f)
	}
	if strings.Contains(body, "hunter2") || strings.Contains(body, "default-secret") {
		t.Errorf("a secret flag's value is served:\n%s", body)
	}
	if code, body := get(t, srv.URL+MetricsPath); code != http.StatusOK || !strings.Contains(body, "lbstate_test_gauge 0") {
		t.Errorf("%s: %d %.300s", MetricsPath, code, body)
	}
}

// MaglevTablesPath streams every table whole, each matching its entry in
// the maps' dump.
func TestMaglevTablesServesEveryTableWhole(t *testing.T) {
	db, maps := newTables(t)
	for id, backends := range map[uint32][]uint32{3: {1, 2}, 7: {5}} {
		table := make([]uint32, maps.Maglev.TableSize())
		for i := range table {
			table[i] = backends[i%len(backends)]
		}
		if err := maps.Maglev.Update(id, table); err != nil {
			t.Fatal(err)
		}
	}
	srv := httptest.NewServer(Handler(slog.New(slog.DiscardHandler), db, maps))
	t.Cleanup(srv.Close)
	d, err := bpf.TakeDump(maps)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(srv.URL + MaglevTablesPath)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	seen := map[uint32]bool{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<22)
	for sc.Scan() {
		var mt MaglevTable
		if err := json.Unmarshal(sc.Bytes(), &mt); err != nil {
			t.Fatalf("line %.100q: %v", sc.Text(), err)
		}
		for _, e := range d.Maglev {
			if e.RevNatID == mt.RevNatID {
				if err := e.Matches(mt.Table); err != nil {
					t.Errorf("table %d: %v", mt.RevNatID, err)
				}
				seen[mt.RevNatID] = true
			}
		}
	}
	if len(seen) != 2 || len(d.Maglev) != 2 {
		t.Errorf("tables served: %v, in the dump: %d; want 3 and 7", seen, len(d.Maglev))
	}
}
