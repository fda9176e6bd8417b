package tables

import "github.com/lbstate/lbstate/lb"

// touched is what a call (or a Batch of calls) recorded of one service:
// its row as last read or written, whether its frontends are to be
// selected again and why, whether it contends for an address, whether its
// backends changed, the backend addresses kept for it while it has no
// row. One record a service, found by one hash of its name (or none: the
// service used last is compared first), where a map for each of these
// facts hashed the name again for each: the Writer's Go map work fell
// from ~8-11% of its time to ~4% (docs/performance.md, fourth step).
type touched struct {
	name lb.ServiceName
	// row is the service's row (nil: none), valid if rowKnown: the
	// rows a batch read or wrote, kept into its flush, which reads the
	// row of every service the batch changed.
	row      *lb.Service
	rowKnown bool
	// refreshed: in changes.order, with the causes of its change.
	refreshed bool
	causes    causeSet
	// contender: in changes.contenders; backendsChanged: in
	// changes.backendsOf.
	contender, backendsChanged bool
	// orphans are, if orphaned (in changes.orphaned), the backend
	// addresses a Batch keeps aside for the service, which has no row.
	orphans  []lb.L3n4Addr
	orphaned bool
	// wrote are the backend rows the service's last upsertBackends wrote
	// (wrote.go).
	wrote wroteRange
}

// find returns the index of name's record, if it has one.
func (ch *changes) find(name lb.ServiceName) (int32, bool) {
	if ch.last > 0 && ch.touched[ch.last-1].name == name {
		return ch.last - 1, true
	}
	i, ok := ch.byName[name]
	if ok {
		ch.last = i + 1
	}
	return i, ok
}

// at returns the index of name's record, made if it has none.
func (ch *changes) at(name lb.ServiceName) int32 {
	i, ok := ch.find(name)
	if !ok {
		i = int32(len(ch.touched))
		ch.touched = append(ch.touched, touched{name: name, wrote: wroteRange{n: -1}})
		ch.byName[name] = i
		ch.last = i + 1
	}
	return i
}

// remember keeps the row of a service (nil: none).
func (ch *changes) remember(name lb.ServiceName, s *lb.Service) {
	t := &ch.touched[ch.at(name)]
	t.row, t.rowKnown = s, true
}

// contend records a service as a contender: its conflicts are brought up
// to date, and the addresses it claims decided with it.
func (ch *changes) contend(name lb.ServiceName) { ch.contendAt(ch.at(name)) }

// contendAt is contend for record i.
func (ch *changes) contendAt(i int32) {
	if t := &ch.touched[i]; !t.contender {
		t.contender = true
		ch.contenders = append(ch.contenders, i)
	}
}

// backendsChanged records that the backends of a service changed.
func (ch *changes) backendsChanged(name lb.ServiceName) {
	i := ch.at(name)
	if t := &ch.touched[i]; !t.backendsChanged {
		t.backendsChanged = true
		ch.backendsOf = append(ch.backendsOf, i)
	}
}

// refresh records that a service's frontends are to be selected again.
func (ch *changes) refresh(name lb.ServiceName) {
	ch.refreshBecause(name, causeSet{first: ch.cause})
}

// refreshBecause is refresh for the given causes.
func (ch *changes) refreshBecause(name lb.ServiceName, why causeSet) {
	i := ch.at(name)
	t := &ch.touched[i]
	if t.refreshed {
		t.causes.join(why)
		return
	}
	t.refreshed, t.causes = true, why
	ch.order = append(ch.order, i)
}

// causesOf returns what caused a service's change in this call or batch.
func (ch *changes) causesOf(name lb.ServiceName) causeSet {
	if i, ok := ch.find(name); ok {
		return ch.causesAt(i)
	}
	return causeSet{first: ch.cause}
}

// causesAt is causesOf for record i.
func (ch *changes) causesAt(i int32) causeSet {
	if ch.touched[i].refreshed {
		return ch.touched[i].causes
	}
	return causeSet{first: ch.cause}
}

// name returns the name of record i.
func (ch *changes) name(i int32) lb.ServiceName { return ch.touched[i].name }

// byNameOrder orders records' indexes by their names.
func (ch *changes) byNameOrder(a, b int32) int { return ch.name(a).Compare(ch.name(b)) }

// setOrphans keeps the backend addresses of a service without a row
// until the batch's flush.
func (ch *changes) setOrphans(name lb.ServiceName, addrs []lb.L3n4Addr) {
	i := ch.at(name)
	t := &ch.touched[i]
	if !t.orphaned {
		t.orphaned = true
		ch.orphaned = append(ch.orphaned, i)
	}
	t.orphans = addrs
}

// orphansOf returns the addresses setOrphans kept for a service, if any.
func (ch *changes) orphansOf(name lb.ServiceName) ([]lb.L3n4Addr, bool) {
	if i, ok := ch.find(name); ok && ch.touched[i].orphaned {
		return ch.touched[i].orphans, true
	}
	return nil, false
}
