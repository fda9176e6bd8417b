package kubeapi

import (
	"errors"
	"strings"
	"sync"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	k8stesting "k8s.io/client-go/testing"
)

// fakeDiscovery serves the resources set in it, safe to change while
// CRDs polls.
type fakeDiscovery struct {
	mu     sync.Mutex
	served map[string][]string // group-version: resources
	err    error               // for every group-version
	asked  int
}

func (d *fakeDiscovery) set(gv string, resources ...string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(resources) == 0 {
		delete(d.served, gv)
	} else {
		d.served[gv] = resources
	}
}

func (d *fakeDiscovery) fail(err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.err = err
}

func (d *fakeDiscovery) polls() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.asked
}

func (d *fakeDiscovery) ServerResourcesForGroupVersion(gv string) (*metav1.APIResourceList, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.asked++
	if d.err != nil {
		return nil, d.err
	}
	rs, ok := d.served[gv]
	if !ok {
		return nil, apierrors.NewNotFound(CRDResource.GroupResource(), gv)
	}
	list := &metav1.APIResourceList{GroupVersion: gv}
	for _, r := range rs {
		list.APIResources = append(list.APIResources, metav1.APIResource{Name: r}, metav1.APIResource{Name: r + "/status"})
	}
	return list, nil
}

// An agent not allowed to list CRDs says so once and asks discovery
// instead: a kind it starts serving is watched, and one it stops
// serving is not, its objects gone. A discovery error leaves the
// watches as they are.
func TestForbiddenCRDListFallsBackToDiscovery(t *testing.T) {
	dyn := newFakeDynamic(object(widgetV1, "Widget", "w1"), object(gadgetV1, "Gadget", "g1"))
	dyn.PrependReactor("list", CRDResource.Resource, func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(CRDResource.GroupResource(), "", errors.New("RBAC says no"))
	})
	disco := &fakeDiscovery{served: map[string][]string{"example.com/v1": {"gadgets"}}}
	ct := runCRDs(t, dyn, disco)
	eventually(t, "synced", ct.crds.HasSynced)
	if got := ct.gadget.holds(); got != "ns/g1@example.com/v1" {
		t.Errorf("synced holding gadgets %q, want g1", got)
	}

	disco.set("example.com/v1", "gadgets", "widgets")
	eventually(t, "the widget handed over", func() bool { return ct.widgets.holds() == "ns/w1@example.com/v1" })

	disco.fail(errors.New("connection refused"))
	polls := disco.polls()
	eventually(t, "a few failed polls", func() bool { return disco.polls() > polls+6 })
	if got := watching(ct.crds, "Widget") + " " + ct.widgets.holds(); got != "v1 ns/w1@example.com/v1" {
		t.Errorf("after failed polls: %s, want the widgets still watched in v1", got)
	}
	disco.fail(nil)

	disco.set("example.com/v1", "gadgets")
	eventually(t, "widgets not watched", func() bool { return watching(ct.crds, "Widget") == "nothing" })
	if got := ct.widgets.holds(); got != "" {
		t.Errorf("holding widgets %q once discovery no longer lists them", got)
	}
	log := ct.log.String()
	if n := strings.Count(log, "Not allowed to list CustomResourceDefinitions"); n != 1 {
		t.Errorf("%d lines about the forbidden CRD list, want 1:\n%s", n, log)
	}
	if n := strings.Count(log, "connection refused"); n != 1 {
		t.Errorf("%d lines about the failing discovery, want 1:\n%s", n, log)
	}
}

// Listing CRDs forbidden only later (RBAC changed; the CRD watch broke
// and its relist was refused): the kinds already watched keep running
// under discovery, and their new objects still come.
func TestCRDListForbiddenLaterKeepsTheWatchedKinds(t *testing.T) {
	dyn := newFakeDynamic(CRDObject(gadgetV1, "Gadget", true, "v1"), object(gadgetV1, "Gadget", "g1"))
	var (
		mu        sync.Mutex
		forbidden bool
	)
	dyn.PrependReactor("list", CRDResource.Resource, func(k8stesting.Action) (bool, runtime.Object, error) {
		mu.Lock()
		defer mu.Unlock()
		if forbidden {
			return true, nil, apierrors.NewForbidden(CRDResource.GroupResource(), "", errors.New("RBAC says no"))
		}
		return false, nil, nil
	})
	crdWatch := watch.NewFake()
	dyn.PrependWatchReactor(CRDResource.Resource, func(k8stesting.Action) (bool, watch.Interface, error) {
		return true, crdWatch, nil
	})
	disco := &fakeDiscovery{served: map[string][]string{"example.com/v1": {"gadgets"}}}
	ct := runCRDs(t, dyn, disco)
	eventually(t, "synced", ct.crds.HasSynced)
	eventually(t, "g1 handed over", func() bool { return ct.gadget.holds() == "ns/g1@example.com/v1" })

	mu.Lock()
	forbidden = true
	mu.Unlock()
	crdWatch.Stop() // the API server ends the watch; the relist is refused
	eventually(t, "discovery asked", func() bool { return disco.polls() > 0 })
	create(t, dyn, gadgetV1, object(gadgetV1, "Gadget", "g2"))
	eventually(t, "g2 handed over", func() bool { return ct.gadget.holds() == "ns/g1@example.com/v1 ns/g2@example.com/v1" })
}
