package reconciler

import (
	"context"
	"fmt"
	"time"

	"github.com/cilium/statedb"
	"github.com/cilium/statedb/reconciler"

	"github.com/lbstate/lbstate/lb"
)

// waitPollInterval is how often WaitReconciled asks again while changes
// await a retry: statedb's WaitUntilReconciled returns at once then, and
// has nothing to wait on until the retry.
const waitPollInterval = 5 * time.Millisecond

// WaitReconciled blocks until r has processed every change to the
// frontends table up to rev (deletions included) and none of them awaits
// a retry, or ctx ends. Take rev from the frontends table after your
// write: frontends.Revision(txn).
func WaitReconciled(ctx context.Context, r reconciler.Reconciler[*lb.Frontend], rev statedb.Revision) error {
	for {
		done, retryLow, err := r.WaitUntilReconciled(ctx, rev)
		if err != nil {
			return fmt.Errorf("waiting for the reconciler to reach revision %d: %w", rev, err)
		}
		// retryLow is the oldest change awaiting a retry, 0 when none is.
		if done >= rev && (retryLow == 0 || retryLow > rev) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for the reconciler to reach revision %d: %w", rev, ctx.Err())
		case <-time.After(waitPollInterval):
		}
	}
}
