package file

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"log/slog"

	"github.com/cilium/hive/cell"
	"github.com/cilium/hive/job"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/lbstate/lbstate/lb"
	"github.com/lbstate/lbstate/reflectors"
	"github.com/lbstate/lbstate/reflectors/kubeapi"
)

// Cell provides the feed of the directory named by --manifests (none: no
// feed) into kubeapi.FeedsGroup, following it in a supervised job: every
// source that reads Kubernetes kinds (k8s.Cell, redirectpolicy.Cell,
// routes.Cell) then also reads it, declaring as the file source. It needs
// job.Cell and a cell.Health provider; with metrics.Cell its bad-input
// counter (lbstate_source_errors_total{source="file"}) is in the hive's
// registry.
var Cell = cell.Module(
	"file-source",
	"Feeds the load-balancing sources from a directory of Kubernetes manifests",

	cell.Config(DefaultConfig),
	cell.Provide(provideFeed),
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

type feedParams struct {
	cell.In

	Config     Config
	Jobs       job.Registry
	Health     cell.Health
	Log        *slog.Logger
	Registerer prometheus.Registerer `optional:"true"`
}

func provideFeed(p feedParams) (kubeapi.FeedsOut, error) {
	dir := p.Config.Manifests
	if dir == "" {
		return kubeapi.FeedsOut{}, nil
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return kubeapi.FeedsOut{}, fmt.Errorf("--manifests %s: not a directory", dir)
	}
	// Settings that fail every run fail the start instead: the body is
	// retried, these would never get better.
	maxSize, err := p.Config.maxFileSize()
	if err != nil {
		return kubeapi.FeedsOut{}, err
	}
	dir = filepath.Clean(dir) // as the watcher's events name it
	rep := reflectors.NewReporter(lb.SourceFile.String(), p.Log, p.Registerer)
	f := NewFeed(dir, maxSize, rep)
	g := p.Jobs.NewGroup(p.Health, job.WithLogger(p.Log))
	g.Add(job.OneShot("manifests-directory", func(ctx context.Context, _ cell.Health) error {
		rep.Log().Info("Serving a manifests directory", "dir", dir, "max-file-size", p.Config.ManifestsMaxFileSize)
		return f.Run(ctx)
	}, job.WithRetry(-1, &job.ExponentialBackoff{Min: 100 * time.Millisecond, Max: 30 * time.Second})))
	return kubeapi.FeedsOut{Feeds: []kubeapi.Feed{f}}, nil
}
