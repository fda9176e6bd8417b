package kubeapi

import (
	"context"
	"log/slog"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// pollDiscovery applies what discovery says the API server serves, every
// DiscoveryInterval until ctx is done. The API server lists a CRD's
// resource there only while the CRD is Established, in the versions it
// serves, which is what watchCRDs reads from the CRD itself.
func (c *CRDs) pollDiscovery(ctx context.Context) {
	every := c.DiscoveryInterval
	if every <= 0 {
		every = DefaultDiscoveryInterval
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	lastErr := ""
	for {
		want, err := c.discover()
		msg := ""
		if err != nil {
			msg = err.Error()
		}
		if msg != "" && msg != lastErr { // once per new error, not at every poll
			c.log.Warn("Asking API discovery for CRD-backed kinds", slog.Any("error", err))
		}
		lastErr = msg
		c.apply(ctx, want)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// discover returns the version each kind should be watched in. A kind
// whose versions could not all be asked about is not known: its informer
// stays as it is rather than stop on a passing error.
func (c *CRDs) discover() ([]target, error) {
	type answer struct {
		list *metav1.APIResourceList
		err  error
	}
	asked := map[string]answer{} // by group-version, once per poll
	var firstErr error
	want := make([]target, len(c.kinds))
	for i, k := range c.kinds {
		want[i].known = true
		for _, v := range k.Versions {
			gv := v.GroupVersion().String()
			a, ok := asked[gv]
			if !ok {
				a.list, a.err = c.disco.ServerResourcesForGroupVersion(gv)
				asked[gv] = a
			}
			if apierrors.IsNotFound(a.err) {
				continue
			}
			if a.err != nil {
				want[i].known = false
				if firstErr == nil {
					firstErr = a.err
				}
				break
			}
			if slices.ContainsFunc(a.list.APIResources, func(r metav1.APIResource) bool { return r.Name == v.Resource }) {
				want[i].gvr, want[i].served = v, true
				break
			}
		}
	}
	return want, firstErr
}
