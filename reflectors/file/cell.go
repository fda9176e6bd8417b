package file

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/cilium/hive/cell"
	"github.com/cilium/statedb"
	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/lbstate/lbstate/lb"
	"github.com/lbstate/lbstate/reflectors"
	"github.com/lbstate/lbstate/reflectors/k8s"
	"github.com/lbstate/lbstate/reflectors/redirectpolicy"
	"github.com/lbstate/lbstate/reflectors/routes"
)

// Cell is the manifests source: it serves the directory named by
// --manifests (none: it does nothing), declaring as the file source. It
// converts with the Kubernetes source's conversions and Config (node
// name, batches), so it needs k8s.Cell too, and tables.Cell, job.Cell and
// a cell.Health provider; with metrics.Cell its counters are in the hive's
// registry.
var Cell = cell.Module(
	"file-source",
	"Feeds the load-balancing tables from a directory of Kubernetes manifests",

	cell.Config(DefaultConfig),
	cell.Invoke(registerSource),
)

// Config is the manifests source's configuration (hive flags).
type Config struct {
	// Manifests is the directory to serve; empty serves none.
	Manifests string
	// ManifestsMaxFileSize is the largest file read (a Kubernetes
	// quantity: 16Mi); a larger one is reported and not read.
	ManifestsMaxFileSize string
}

// DefaultConfig serves no directory, and files of up to 16 MiB.
var DefaultConfig = Config{ManifestsMaxFileSize: "16Mi"}

// Flags registers the configuration's flags.
func (def Config) Flags(flags *pflag.FlagSet) {
	flags.String("manifests", def.Manifests, "Directory of Kubernetes manifests to serve (no cluster needed); edits are followed")
	flags.String("manifests-max-file-size", def.ManifestsMaxFileSize, "Largest manifest file read (e.g. 512Ki, 16Mi); a larger one is reported and not read")
}

// maxFileSize is ManifestsMaxFileSize in bytes.
func (c Config) maxFileSize() (int64, error) {
	q, err := resource.ParseQuantity(c.ManifestsMaxFileSize)
	if err != nil || q.Value() <= 0 {
		return 0, fmt.Errorf("--manifests-max-file-size %q: want a size above zero, such as 16Mi", c.ManifestsMaxFileSize)
	}
	return q.Value(), nil
}

type sourceParams struct {
	cell.In

	Source   reflectors.Params
	Config   Config
	K8s      k8s.Config
	Policies statedb.RWTable[*redirectpolicy.Status] // k8s.Cell's
	// RouteStatus, from routes.Cell, keeps a status row per route.
	RouteStatus statedb.RWTable[*routes.Status] `optional:"true"`
}

func registerSource(p sourceParams) error {
	dir := p.Config.Manifests
	if dir == "" {
		return nil
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return fmt.Errorf("--manifests %s: not a directory", dir)
	}
	// Settings that fail every run fail the start instead: the body is
	// retried, these would never get better.
	if err := p.K8s.Validate(); err != nil {
		return err
	}
	maxSize, err := p.Config.maxFileSize()
	if err != nil {
		return err
	}
	dir = filepath.Clean(dir) // as the watcher's events name it
	return reflectors.Register(p.Source, lb.SourceFile, func(ctx context.Context, s *reflectors.Source) error {
		src, err := newSource(dir, maxSize, p.K8s, s)
		if err != nil {
			return err
		}
		src.r.ReportPolicies(p.Policies)
		if p.RouteStatus != nil {
			src.r.PublishRouteStatus(p.RouteStatus)
		}
		s.Log().Info("Serving a manifests directory", "dir", dir, "node", p.K8s.K8sNodeName, "max-file-size", p.Config.ManifestsMaxFileSize)
		return src.run(ctx)
	})
}
