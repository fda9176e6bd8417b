package monitoring

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// prometheus is a Prometheus server of the test's own: on a free
// loopback port, with its data in the test's directory, killed when the
// test ends.
type promServer struct {
	t   *testing.T
	url string
}

// startPrometheus starts Prometheus scraping target every second, as the
// README's scrape configuration says (a node label on the target), with
// the alert rules loaded.
func startPrometheus(t *testing.T, target, node string) *promServer {
	t.Helper()
	bin := lookPath(t, "prometheus")
	dir := t.TempDir()
	rules, err := filepath.Abs("rules/lbstate.rules.yml")
	if err != nil {
		t.Fatal(err)
	}
	config := fmt.Sprintf(`global: {scrape_interval: 1s, scrape_timeout: 1s, evaluation_interval: 1s}
rule_files: [%q]
scrape_configs:
- job_name: lbstate
  static_configs:
  - targets: [%q]
    labels: {node: %q}
`, rules, target, node)
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	// A port found free may be taken before Prometheus binds it: then it
	// exits, and another is tried.
	for attempt := 0; ; attempt++ {
		p, logs := tryPrometheus(t, bin, dir, freeAddr(t))
		if p != nil {
			return p
		}
		if attempt == 3 {
			t.Fatalf("prometheus exited:\n%s", logs)
		}
	}
}

// tryPrometheus starts Prometheus on addr and waits until it is ready;
// nil if it exited.
func tryPrometheus(t *testing.T, bin, dir, addr string) (*promServer, string) {
	t.Helper()
	cmd := exec.Command(bin, "--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address="+addr, "--log.level=warn")
	logs := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
	})
	p := &promServer{t: t, url: "http://" + addr}
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		select {
		case <-exited:
			return nil, logs.String()
		default:
		}
		if resp, err := http.Get(p.url + "/-/ready"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p, ""
			}
		}
	}
	t.Fatalf("prometheus not ready in 15 s:\n%s", logs.String())
	return nil, ""
}

// lockedBuffer collects a process's output.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// sample is one series of an instant query's result.
type sample struct {
	Metric map[string]string `json:"metric"`
	Value  [2]any            `json:"value"`
}

func (s sample) value() float64 {
	var v float64
	str, _ := s.Value[1].(string)
	fmt.Sscan(str, &v)
	return v
}

// query evaluates expr now, through the HTTP API; a query Prometheus
// refuses fails the test.
func (p *promServer) query(expr string) ([]sample, error) {
	resp, err := http.PostForm(p.url+"/api/v1/query", url.Values{"query": {expr}})
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	var r struct {
		Status, Error string
		Data          struct {
			ResultType string          `json:"resultType"`
			Result     json.RawMessage `json:"result"`
		}
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, fmt.Errorf("%s: %s", resp.Status, body)
	}
	if r.Status != "success" {
		return nil, fmt.Errorf("%s", r.Error)
	}
	if r.Data.ResultType != "vector" {
		return nil, fmt.Errorf("result of type %s, want a vector", r.Data.ResultType)
	}
	var out []sample
	return out, json.Unmarshal(r.Data.Result, &out)
}

// waitFor polls expr until ok holds for its result.
func (p *promServer) waitFor(what, expr string, ok func([]sample) bool) {
	p.t.Helper()
	var last []sample
	var err error
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if last, err = p.query(expr); err == nil && ok(last) {
			return
		}
	}
	p.t.Fatalf("prometheus never had %s (%s): %v %v", what, expr, last, err)
}

// rules returns the health of the rules Prometheus loaded, by name.
func (p *promServer) rules() map[string]string {
	p.t.Helper()
	resp, err := http.Get(p.url + "/api/v1/rules")
	if err != nil {
		p.t.Fatal(err)
	}
	defer resp.Body.Close()
	var r struct {
		Data struct {
			Groups []struct {
				Rules []struct {
					Name, Health, LastError string
				}
			}
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		p.t.Fatal(err)
	}
	out := map[string]string{}
	for _, g := range r.Data.Groups {
		for _, rl := range g.Rules {
			out[rl.Name] = rl.Health + rl.LastError
		}
	}
	return out
}
