package routestatus

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/cilium/statedb"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
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

// term is what one term of leadership knows of the API.
type term struct {
	// written is each route's desired status (as JSON) known to be in
	// the API, so that a row that changes without changing its status
	// costs no API call. A new term knows only what it lists: the writer
	// before may have stopped mid-way.
	written map[routes.Key]string
	// listed are the routes the term's list found with another status:
	// the first write of each goes on the listed version (a Conflict if
	// it changed since) rather than a version read alone.
	listed map[routes.Key]listedRoute
}

type listedRoute struct {
	u   *unstructured.Unstructured
	gvr schema.GroupVersionResource
}

// sync brings key's status.parents up to date, if they are not already.
func (w *Writer) sync(ctx context.Context, key routes.Key, t *term) error {
	row, desired, fingerprint, ok := w.desired(w.db.ReadTxn(), key)
	listed, fromList := t.listed[key]
	delete(t.listed, key)
	if !ok {
		delete(t.written, key) // the route is gone
		return nil
	}
	if t.written[key] == fingerprint {
		return nil
	}
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := w.limiter.Wait(ctx); err != nil {
			return err
		}
		u, gvr := listed.u, listed.gvr
		if !fromList {
			var err error
			if u, gvr, err = w.api.get(ctx, key); err != nil {
				return err
			}
		}
		fromList = false // a Conflict reads it again
		existing, err := parentsOf(u)
		if err != nil {
			return err
		}
		if newerThan(existing, ControllerName, row.Generation) {
			return errNewer
		}
		next, dropped, changed := merge(existing, desired, ControllerName, w.now())
		if !changed {
			return nil
		}
		if dropped > 0 {
			w.log.Warn("Route status: parents left out, status.parents holds at most 32 entries",
				"route", key, "written", len(desired)-dropped, "left-out", dropped)
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
		delete(t.written, key) // deleted meanwhile: its row goes too
		return nil
	case errors.Is(err, errNewer):
		return nil
	case err != nil:
		return err
	}
	t.written[key] = fingerprint
	return nil
}

// prime starts a term: it lists every route kind once, and records the
// routes whose status in the API is already as desired, and the others
// as listed. What it cannot list is left to sync to read.
func (w *Writer) prime(ctx context.Context) *term {
	t := &term{written: map[routes.Key]string{}, listed: map[routes.Key]listedRoute{}}
	now := metav1.Now()
	for kind := range hasStatus {
		if err := w.limiter.Wait(ctx); err != nil {
			return t
		}
		txn := w.db.ReadTxn()
		err := w.api.eachRoute(ctx, kind, func(u *unstructured.Unstructured, gvr schema.GroupVersionResource) {
			key := routes.Key{Kind: kind, Namespace: u.GetNamespace(), Name: u.GetName()}
			row, desired, fingerprint, ok := w.desired(txn, key)
			if !ok {
				return
			}
			existing, err := parentsOf(u)
			if err != nil || newerThan(existing, ControllerName, row.Generation) {
				return
			}
			if _, _, changed := merge(existing, desired, ControllerName, now); changed {
				t.listed[key] = listedRoute{u, gvr}
			} else {
				t.written[key] = fingerprint
			}
		})
		if err != nil && !apierrors.IsNotFound(err) {
			w.log.Debug("Route status: cannot list routes; reading each", "kind", kind, "error", err)
		}
	}
	return t
}
