package tables

// entryRing holds the journal's entries, oldest first, in chunks of
// ringChunk: growing copies no entry (a doubling array copied the whole
// ring, up to 16 MiB with pointers for the collector to scan again) and
// only the oldest and newest chunks have room to spare (a doubling
// array could have half of it).
type entryRing struct {
	chunks []*[ringChunk]historyEntry // chunks[0] holds the oldest
	head   int                        // the oldest's index in chunks[0]
	n      int
	spare  *[ringChunk]historyEntry // an emptied chunk, for the next push
}

// ringChunk is entries per chunk: 30 KiB of 120-byte entries.
const ringChunk = 256

func (r *entryRing) len() int { return r.n }

// at returns the i-th oldest entry (0 <= i < len()).
func (r *entryRing) at(i int) *historyEntry {
	i += r.head
	return &r.chunks[i/ringChunk][i%ringChunk]
}

// push appends a copy of e.
func (r *entryRing) push(e *historyEntry) {
	if end := r.head + r.n; end == len(r.chunks)*ringChunk {
		c := r.spare
		if c == nil {
			c = new([ringChunk]historyEntry)
		}
		r.spare = nil
		r.chunks = append(r.chunks, c)
	}
	r.n++
	*r.at(r.n - 1) = *e
}

// pop removes the oldest entry and returns its size.
func (r *entryRing) pop() int32 {
	c := r.chunks[0]
	size := c[r.head].size
	c[r.head] = historyEntry{} // nothing kept for the collector
	r.head++
	r.n--
	if r.head == ringChunk || r.n == 0 {
		r.chunks[0] = nil
		r.chunks = r.chunks[1:]
		r.head = 0
		r.spare = c
	}
	return size
}
