package routestatus

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/cilium/hive/cell"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coordinationv1 "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// Run's health reports.
const (
	standingBy = "Campaigning for the route status Lease: another agent writes route status"
	writing    = "Writing route status (the Lease holder)"
)

// Run campaigns for the Lease and, while this agent holds it, writes
// route status (Lead), until ctx is done; then it stops writing first
// and releases the Lease after, so that two agents never write at once
// (the next one takes over at once, not after the lease expires). A
// lost lease stops the writing and starts a new campaign.
func (w *Writer) Run(ctx context.Context, leases coordinationv1.LeasesGetter, health cell.Health) error {
	if !w.initialized(ctx) { // campaign only with the whole picture
		return nil
	}
	health.OK(standingBy)
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: w.cfg.RouteStatusLeaseNamespace, Name: w.cfg.RouteStatusLeaseName},
		Client:     leases,
		LockConfig: resourcelock.ResourceLockConfig{Identity: w.cfg.RouteStatusIdentity},
	}
	terms := make(chan context.Context)
	config := leaderelection.LeaderElectionConfig{
		Lock:            lock,
		Name:            w.cfg.RouteStatusLeaseName,
		LeaseDuration:   w.cfg.RouteStatusLeaseDuration,
		RenewDeadline:   w.cfg.renewDeadline(),
		RetryPeriod:     w.cfg.retryPeriod(),
		ReleaseOnCancel: true,
		Callbacks: leaderelection.LeaderCallbacks{
			// The term runs in Run's goroutine, which returns only after
			// it, and only then cancels the election (releasing).
			OnStartedLeading: func(term context.Context) {
				select {
				case terms <- term:
				case <-term.Done():
				}
			},
			OnStoppedLeading: func() {},
			OnNewLeader: func(identity string) {
				w.log.Info("Route status writer elected", slog.String("lease", w.cfg.RouteStatusLeaseNamespace+"/"+w.cfg.RouteStatusLeaseName),
					slog.String("identity", identity), slog.Bool("self", identity == w.cfg.RouteStatusIdentity))
			},
		},
	}
	if _, err := leaderelection.NewLeaderElector(config); err != nil {
		return err
	}
	// The election outlives ctx until the term has stopped.
	electCtx, stopElection := context.WithCancel(context.WithoutCancel(ctx))
	elected := make(chan struct{})
	go func() {
		defer close(elected)
		for electCtx.Err() == nil {
			le, _ := leaderelection.NewLeaderElector(config) // validated above
			le.Run(electCtx)
		}
	}()
	defer func() {
		stopElection()
		<-elected
	}()
	for {
		select {
		case <-ctx.Done():
			return nil
		case term := <-terms:
			termCtx, cancel := context.WithCancel(term)
			stop := context.AfterFunc(ctx, cancel)
			w.log.Info("Writing route status: this agent holds the lease", slog.String("identity", w.cfg.RouteStatusIdentity))
			health.OK(writing)
			err := w.Lead(termCtx)
			stop()
			cancel()
			switch {
			case err != nil:
				return fmt.Errorf("route status: %w", err) // the lease is released; the job retries
			case ctx.Err() == nil:
				w.log.Warn("Route status: lease lost; campaigning again", slog.String("identity", w.cfg.RouteStatusIdentity))
				health.OK(standingBy)
			}
		}
	}
}
