package file_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/cilium/hive"
	"github.com/cilium/hive/cell"
	"github.com/cilium/hive/job"
	"github.com/cilium/statedb"

	"github.com/lbstate/lbstate/reflectors/file"
	"github.com/lbstate/lbstate/reflectors/k8s"
	"github.com/lbstate/lbstate/reflectors/kubeapi"
	"github.com/lbstate/lbstate/tables"
)

// Settings the source could never run with fail the hive's start, naming
// the flag, instead of a body retried forever.
func TestInvalidSettingsFailTheStart(t *testing.T) {
	for name, tc := range map[string]struct {
		file file.Config
		k8s  func(*k8s.Flags)
		node string
		want string
	}{
		"missing directory": {file.Config{Manifests: "/nonexistent-manifests"}, func(*k8s.Flags) {}, "node-a", "--manifests /nonexistent-manifests"},
		"batch size 0":      {file.Config{Manifests: t.TempDir(), ManifestsMaxFileSize: "16Mi"}, func(c *k8s.Flags) { c.K8sBatchSize = 0 }, "node-a", "--k8s-batch-size"},
		"no node name":      {file.Config{Manifests: t.TempDir(), ManifestsMaxFileSize: "16Mi"}, func(*k8s.Flags) {}, "", "--k8s-node-name"},
	} {
		t.Run(name, func(t *testing.T) {
			h := hive.New(statedb.Cell, job.Cell, cell.SimpleHealthCell, tables.Cell, kubeapi.Cell, k8s.Cell, file.Cell)
			hive.AddConfigOverride(h, func(c *file.Config) { *c = tc.file })
			hive.AddConfigOverride(h, func(c *kubeapi.NodeConfig) { c.K8sNodeName = tc.node })
			hive.AddConfigOverride(h, tc.k8s)
			log := slog.New(slog.DiscardHandler)
			err := h.Start(log, context.Background())
			if err == nil {
				h.Stop(log, context.Background())
				t.Fatal("the hive started")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not name %s", err, tc.want)
			}
		})
	}
}
