package routestatus

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/cilium/statedb"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/util/retry"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/lbstate/lbstate/lb"
	"github.com/lbstate/lbstate/reflectors/routes"
	"github.com/lbstate/lbstate/tables"
)

// errNewer says that the API has a status of a newer generation than
// the row's: the row catches up and queues the route again.
var errNewer = errors.New("the route's status observes a newer generation than this agent has read")

// desired returns key's row, its status.parents entries of ours, and
// their fingerprint (generation and entries as JSON); false when the
// source holds no such route.
func (w *Writer) desired(txn statedb.ReadTxn, key routes.Key) (*routes.Status, []gwv1.RouteParentStatus, string, bool) {
	row, _, ok := w.routes.Get(txn, routes.StatusByKey.Query(routes.StatusID(w.source, key)))
	if !ok {
		return nil, nil, "", false
	}
	exists := func(name lb.ServiceName) bool {
		s, _, ok := w.services.Get(txn, tables.ServiceByName.Query(name))
		return ok && s.Policy() != nil
	}
	desired := Desired(row, exists, ControllerName)
	data, _ := json.Marshal(struct { // (plain values: cannot fail)
		Generation int64
		Desired    []gwv1.RouteParentStatus
	}{row.Generation, desired})
	return row, desired, string(data), true
}

// sync brings key's status.parents up to date, if they are not already.
func (w *Writer) sync(ctx context.Context, key routes.Key, written map[routes.Key]string) error {
	row, desired, fingerprint, ok := w.desired(w.db.ReadTxn(), key)
	if !ok {
		delete(written, key) // the route is gone
		return nil
	}
	if written[key] == fingerprint {
		return nil
	}
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := w.limiter.Wait(ctx); err != nil {
			return err
		}
		u, gvr, err := w.api.get(ctx, key)
		if err != nil {
			return err
		}
		existing, err := parentsOf(u)
		if err != nil {
			return err
		}
		if newerThan(existing, ControllerName, row.Generation) {
			return errNewer
		}
		next, changed := merge(existing, desired, ControllerName, w.now())
		if !changed {
			return nil
		}
		if err := setParents(u, next); err != nil {
			return err
		}
		if err := w.limiter.Wait(ctx); err != nil {
			return err
		}
		err = w.api.updateStatus(ctx, gvr, u)
		switch {
		case err == nil:
			w.metrics.writes.WithLabelValues(resultWritten).Inc()
		case apierrors.IsConflict(err):
			w.metrics.writes.WithLabelValues(resultConflict).Inc()
		default:
			w.metrics.writes.WithLabelValues(resultError).Inc()
		}
		return err
	})
	switch {
	case apierrors.IsNotFound(err):
		delete(written, key) // deleted meanwhile: its row goes too
		return nil
	case errors.Is(err, errNewer):
		return nil
	case err != nil:
		return err
	}
	written[key] = fingerprint
	return nil
}

// prime lists every route kind once and records in written the routes
// whose status in the API is already as desired: a new term then reads
// them with a list per kind, not a read per route. What it cannot list
// is left to sync.
func (w *Writer) prime(ctx context.Context, written map[routes.Key]string) {
	now := metav1.Now()
	for kind := range hasStatus {
		if err := w.limiter.Wait(ctx); err != nil {
			return
		}
		txn := w.db.ReadTxn()
		err := w.api.eachRoute(ctx, kind, func(u *unstructured.Unstructured) {
			key := routes.Key{Kind: kind, Namespace: u.GetNamespace(), Name: u.GetName()}
			row, desired, fingerprint, ok := w.desired(txn, key)
			if !ok {
				return
			}
			existing, err := parentsOf(u)
			if err != nil || newerThan(existing, ControllerName, row.Generation) {
				return
			}
			if _, changed := merge(existing, desired, ControllerName, now); !changed {
				written[key] = fingerprint
			}
		})
		if err != nil && !apierrors.IsNotFound(err) {
			w.log.Debug("Route status: cannot list routes; reading each", "kind", kind, "error", err)
		}
	}
}
