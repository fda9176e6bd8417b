package reflectors

import (
	"context"
	"sync"
)

// Event is one object a feed handed a source (added or changed, or
// deleted), or the marker that its initial state is all in (Synced).
type Event struct {
	Obj     any
	Deleted bool
	Synced  bool
}

// Queue is what a source that a feed pushes objects to needs between the
// two: Push and Synced queue events (kubeapi.Events), and Run applies them
// in batches, one batch at a time. A source with a hot path of its own
// (k8s.Reflector) keeps its own pipeline.
type Queue struct {
	events   chan Event
	stopped  chan struct{}
	stop     func()
	maxBatch int
}

// NewQueue returns a queue of size events, applied in batches of at most
// maxBatch.
func NewQueue(size, maxBatch int) *Queue {
	stopped := make(chan struct{})
	return &Queue{events: make(chan Event, size), stopped: stopped, stop: sync.OnceFunc(func() { close(stopped) }), maxBatch: maxBatch}
}

// Push queues an object that was added or changed (deleted false) or
// removed. It waits for room in the queue, but not once Run has returned.
func (q *Queue) Push(obj any, deleted bool) { q.send(Event{Obj: obj, Deleted: deleted}) }

// Synced queues the marker that every object of the initial state was
// pushed.
func (q *Queue) Synced() { q.send(Event{Synced: true}) }

func (q *Queue) send(ev Event) {
	select {
	case q.events <- ev:
	case <-q.stopped:
	}
}

// Run calls feed in its own goroutine and hands apply what it pushes, in
// batches (all that is queued, up to the batch size), until ctx is done,
// feed fails or apply fails; then it waits for feed to return and returns
// apply's error, else feed's. Run may be called once.
func (q *Queue) Run(ctx context.Context, feed func(ctx context.Context) error, apply func([]Event) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var feedErr error
	fed := make(chan struct{})
	go func() {
		defer close(fed)
		if feedErr = feed(ctx); feedErr != nil {
			cancel()
		}
	}()
	err := q.loop(ctx, apply)
	cancel()
	q.stop() // a feed waiting to push returns
	<-fed
	if err != nil {
		return err
	}
	return feedErr
}

func (q *Queue) loop(ctx context.Context, apply func([]Event) error) error {
	batch := make([]Event, 0, q.maxBatch)
	for {
		batch = batch[:0]
		select {
		case <-ctx.Done():
			return nil
		case ev := <-q.events:
			batch = append(batch, ev)
		}
	fill:
		for len(batch) < q.maxBatch {
			select {
			case ev := <-q.events:
				batch = append(batch, ev)
			default:
				break fill
			}
		}
		if err := apply(batch); err != nil {
			return err
		}
	}
}
