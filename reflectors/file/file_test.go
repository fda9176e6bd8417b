package file

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cilium/statedb"

	"github.com/lbstate/lbstate/lb"
	"github.com/lbstate/lbstate/reflectors"
	"github.com/lbstate/lbstate/reflectors/k8s"
	"github.com/lbstate/lbstate/reflectors/kubeapi"
	"github.com/lbstate/lbstate/reflectors/redirectpolicy"
	"github.com/lbstate/lbstate/reflectors/routes"
	"github.com/lbstate/lbstate/tables"
)

const webYAML = `apiVersion: v1
kind: Service
metadata: {name: web}
spec: {clusterIP: 10.96.0.1, ports: [{port: 80}]}
---
# the endpoints
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: web-1
  labels: {kubernetes.io/service-name: web}
addressType: IPv4
ports: [{port: 8080}]
endpoints: [{addresses: [ENDPOINTS]}]
`

// testSource is the k8s reflector, the redirect policies' controller and
// the routes' reading a directory feed, as a hive of file.Cell, k8s.Cell,
// redirectpolicy.Cell and routes.Cell runs them.
type testSource struct {
	src, policies, routes *reflectors.Source
	rep                   *reflectors.Reporter
}

// Errors counts the bad input reported by the feed and its sources.
func (s *testSource) Errors() uint64 {
	return s.src.Errors() + s.policies.Errors() + s.routes.Errors() + s.rep.Errors()
}

// startSource serves dir as the file source (local node node-1) until the
// test ends; done receives what the feed's Run returned.
func startSource(t testing.TB, dir string, log *slog.Logger) (*testSource, *tables.Writer, *statedb.DB, context.CancelFunc, chan error) {
	t.Helper()
	return startSourceMax(t, dir, log, 16<<20)
}

// startSourceWith serves dir reading files of up to maxFileSize bytes.
func startSourceWith(t testing.TB, dir string, log *slog.Logger, maxFileSize int64) (*testSource, *tables.Writer, *statedb.DB) {
	t.Helper()
	s, w, db, _, _ := startSourceMax(t, dir, log, maxFileSize)
	return s, w, db
}

func startSourceMax(t testing.TB, dir string, log *slog.Logger, maxFileSize int64) (*testSource, *tables.Writer, *statedb.DB, context.CancelFunc, chan error) {
	t.Helper()
	db := statedb.New()
	w, err := tables.New(db, nil)
	if err != nil {
		t.Fatal(err)
	}
	s, err := reflectors.NewSource(w, lb.SourceFile, log, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg := k8s.DefaultConfig
	cfg = cfg.WithNode("node-1")
	r, err := k8s.NewReflector(cfg, s, lb.SourceFile)
	if err != nil {
		t.Fatal(err)
	}
	ps, err := reflectors.NewSourceAs(w, lb.SourceFile.String()+"-redirect-policies", lb.SourceFile, log, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := redirectpolicy.NewController(redirectpolicy.Options{}, cfg.K8sNodeName, ps, lb.SourceFile, nil)
	rs, err := reflectors.NewSourceAs(w, lb.SourceFile.String()+"-routes", lb.SourceFile, log, nil)
	if err != nil {
		t.Fatal(err)
	}
	rc := routes.NewController(rs, lb.SourceFile, nil)
	rep := reflectors.NewReporter(lb.SourceFile.String(), log, nil)
	feed := NewFeed(filepath.Clean(dir), maxFileSize, rep)
	feed.Want(k8s.Kinds(cfg)...)
	feed.Want(redirectpolicy.Kinds(cfg.K8sNodeName)...)
	feed.Want(routes.Kinds()...)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	done := make(chan error, 1)
	go func() { done <- feed.Run(ctx) }()
	go r.Run(ctx, r.Subscribe(feed))   //nolint:errcheck // the tables say what it did
	go c.Run(ctx, c.Subscribe(feed))   //nolint:errcheck // the tables say what it did
	go rc.Run(ctx, rc.Subscribe(feed)) //nolint:errcheck // the tables say what it did
	return &testSource{s, ps, rs, rep}, w, db, cancel, done
}

// decodeManifest decodes as a feed wanting the k8s reflector's kinds.
func decodeManifest(path string, data []byte) manifest {
	wanted := map[string]kubeapi.FeedKind{}
	for _, k := range slices.Concat(k8s.Kinds(k8s.DefaultConfig), redirectpolicy.Kinds(""), routes.Kinds()) {
		wanted[k.Kind] = k
	}
	d, err := newDecoder(wanted)
	if err != nil {
		panic(err)
	}
	return d.decodeManifest(path, data)
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// frontends waits until the frontends table reads want (address ->
// backends), or fails.
func frontends(t *testing.T, db *statedb.DB, w *tables.Writer, want []string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	var got []string
	for time.Now().Before(deadline) {
		got = got[:0]
		for fe := range w.Frontends().All(db.ReadTxn()) {
			row := fe.Address.String() + " ->"
			for _, b := range fe.Backends {
				row += " " + b.Address.String()
				if b.State != lb.BackendActive {
					row += " " + b.State.String()
				}
			}
			got = append(got, row)
		}
		if slices.Equal(got, want) {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("frontends\n  got  %q\n  want %q", got, want)
}

// The directory's objects are declared as the file source, and edits, new
// files (in new subdirectories), broken edits and deletions are followed.
func TestFollowsEditsNewFilesAndDeletions(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "web.yaml"), strings.Replace(webYAML, "ENDPOINTS", "10.0.0.1", 1))
	write(t, filepath.Join(dir, "notes.txt"), "not a manifest")

	var logs bytes.Buffer
	src, w, db, _, _ := startSource(t, dir, slog.New(slog.NewTextHandler(&logs, nil)))

	_, initialized := w.Frontends().Initialized(db.ReadTxn())
	select {
	case <-initialized:
	case <-time.After(5 * time.Second):
		t.Fatal("not initialized")
	}
	frontends(t, db, w, []string{"10.96.0.1:80/TCP -> 10.0.0.1:8080/TCP"})
	svc, _, _ := w.Services().Get(db.ReadTxn(), tables.ServiceByName.Query(lb.NewServiceName("default", "web")))
	if svc.Policy().Source != lb.SourceFile {
		t.Fatalf("declared as %s, want file", svc.Policy().Source)
	}

	// An edit.
	write(t, filepath.Join(dir, "web.yaml"), strings.Replace(webYAML, "ENDPOINTS", "10.0.0.1, 10.0.0.2", 1))
	frontends(t, db, w, []string{"10.96.0.1:80/TCP -> 10.0.0.1:8080/TCP 10.0.0.2:8080/TCP"})

	// A new file, in a new subdirectory.
	sub := filepath.Join(dir, "more")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // the watcher adds the new directory
	write(t, filepath.Join(sub, "api.yml"), strings.ReplaceAll(strings.Replace(
		strings.Replace(webYAML, "ENDPOINTS", "10.0.1.1", 1), "10.96.0.1", "10.96.0.2", 1), "web", "api"))
	frontends(t, db, w, []string{
		"10.96.0.1:80/TCP -> 10.0.0.1:8080/TCP 10.0.0.2:8080/TCP",
		"10.96.0.2:80/TCP -> 10.0.1.1:8080/TCP",
	})

	// A broken edit of web.yaml: reported by file and line, web keeps what
	// it had; the other file still applies.
	errorsBefore := src.Errors()
	write(t, filepath.Join(dir, "web.yaml"), "apiVersion: v1\nkind: Service\nmetadata: {name: web}\nspec: {clusterIP: 10.96.0.1, ports: [{port: 80}]\n")
	write(t, filepath.Join(sub, "api.yml"), strings.ReplaceAll(strings.Replace(
		strings.Replace(webYAML, "ENDPOINTS", "10.0.1.9", 1), "10.96.0.1", "10.96.0.2", 1), "web", "api"))
	frontends(t, db, w, []string{
		"10.96.0.1:80/TCP -> 10.0.0.1:8080/TCP 10.0.0.2:8080/TCP",
		"10.96.0.2:80/TCP -> 10.0.1.9:8080/TCP",
	})
	if src.Errors() == errorsBefore || !strings.Contains(logs.String(), "web.yaml:") {
		t.Fatalf("the broken file was not reported with its name and line:\n%s", logs.String())
	}

	// Deleting a file removes what it declared.
	if err := os.Remove(filepath.Join(dir, "web.yaml")); err != nil {
		t.Fatal(err)
	}
	frontends(t, db, w, []string{"10.96.0.2:80/TCP -> 10.0.1.9:8080/TCP"})
}

func TestDecodeErrorsNameFileAndLine(t *testing.T) {
	m := decodeManifest("bad.yaml", []byte("apiVersion: v1\nkind: Service\nmetadata: {name: a}\n---\napiVersion: v1\nkind: Service\nmetadata:\n  name: b\n  labels: [oops\n"))
	// The second document starts on line 5; its error is on its line 5,
	// the file's line 9.
	if len(m.errs) != 1 || !strings.Contains(m.errs[0].Error(), "bad.yaml:9: ") {
		t.Fatalf("errors %v, want one naming bad.yaml line 9", m.errs)
	}
}
