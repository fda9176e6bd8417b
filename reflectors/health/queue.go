package health

import "time"

// dueQueue is the targets waiting for their next probe, soonest first: a
// binary heap that keeps each target's due time beside it, so that
// ordering reads one array rather than every target, with no interface
// calls (container/heap's cost more than the rest of a dispatch). A
// target is in it unless a probe of it is under way, or it is not probed
// and its breaker is not open.
type dueQueue []queued

type queued struct {
	due time.Duration
	t   *target
}

func (q dueQueue) Len() int { return len(q) }

// first is the soonest target; the queue must not be empty.
func (q dueQueue) first() *target { return q[0].t }

// put queues t at t.due, or moves it there.
func (q *dueQueue) put(t *target) {
	if t.index < 0 {
		t.index = len(*q)
		*q = append(*q, queued{t.due, t})
		q.up(t.index)
		return
	}
	(*q)[t.index].due = t.due
	if !q.down(t.index) {
		q.up(t.index)
	}
}

// pop takes the soonest target out.
func (q *dueQueue) pop() *target {
	t := (*q)[0].t
	q.removeAt(0)
	return t
}

func (q *dueQueue) remove(t *target) {
	if t.index >= 0 {
		q.removeAt(t.index)
	}
}

func (q *dueQueue) removeAt(i int) {
	old := *q
	n := len(old) - 1
	old[i].t.index = -1
	if i != n {
		old.set(i, old[n])
	}
	old[n] = queued{}
	*q = old[:n]
	if i != n && !q.down(i) {
		q.up(i)
	}
}

func (q dueQueue) up(i int) {
	e := q[i]
	for i > 0 {
		parent := (i - 1) / 2
		if q[parent].due <= e.due {
			break
		}
		q.set(i, q[parent])
		i = parent
	}
	q.set(i, e)
}

// down sifts q[i] down and reports whether it moved.
func (q dueQueue) down(i int) bool {
	e, start, n := q[i], i, len(q)
	for {
		child := 2*i + 1
		if child >= n {
			break
		}
		if right := child + 1; right < n && q[right].due < q[child].due {
			child = right
		}
		if e.due <= q[child].due {
			break
		}
		q.set(i, q[child])
		i = child
	}
	q.set(i, e)
	return i > start
}

// set puts e at i, and tells its target.
func (q dueQueue) set(i int, e queued) {
	q[i] = e
	e.t.index = i
}
