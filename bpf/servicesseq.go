package bpf

import (
	"fmt"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
)

// The datapath reads a master with one lookup when no write of
// lb_services overlapped the read, which it tells from lb_services_seq
// (include/lb.h): every writer announces each write there, before and
// after it. The word is pinned with the maps, so that programs loaded by
// an earlier agent, still running while a restarted one writes, see the
// new agent's writes too. Writers add to it with atomics on its memory
// (the map is mmapable): a syscall would cost a write as much again.

// Seq counts the writes of lb_services in flight and done
// (lb_services_seq): Maps.Services brackets each of its writes with
// BeginWrite and EndWrite. A program that writes lb_services by other
// means must bracket its writes the same way, or the datapath may take a
// read its write overlapped for a good one (torn, or a miss).
type Seq interface {
	Name() string
	// Load returns the word: writes in flight in the low 32 bits, writes
	// done in the high 32.
	Load() uint64
	// BeginWrite announces a write; EndWrite, once per BeginWrite, says
	// it is done. Until then, the datapath reads masters guarded. Maps'
	// Seq takes an EndWrite with no write in flight for a write done
	// (it must not borrow from the count done: see seqWord.EndWrite);
	// a writer of the word by other means must never subtract from an
	// in-flight count of 0 either.
	BeginWrite()
	EndWrite()
}

// SeqInFlight masks a Seq word's writes in flight; SeqDone is one write
// done (LB_SEQ_IN_FLIGHT and LB_SEQ_DONE in include/lb.h).
const (
	SeqInFlight = 1<<32 - 1
	SeqDone     = 1 << 32
)

// seqWord is a Seq on a word in memory, the kernel map's or the heap's.
type seqWord struct {
	name string
	em   *ebpf.Map // nil in memory

	// mu keeps the mapping while a bracket adds to it: closeMapping
	// takes it to unmap, and points w at a word of the heap first, so
	// that a write after Close fails in its syscall, as before the word
	// existed, rather than faulting here (which no recover catches).
	mu  sync.RWMutex
	w   *atomic.Uint64
	mem []byte // the kernel map's mapping
}

func (s *seqWord) Name() string { return s.name }

func (s *seqWord) Load() uint64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.w.Load()
}

func (s *seqWord) BeginWrite() {
	s.mu.RLock()
	defer s.mu.RUnlock()
	s.w.Add(1)
	// Where the add is a load-acquire and store-release pair (arm64
	// without LSE atomics), the kernel's stores of the write that follows
	// could become visible before the add's; an acquire load after it
	// keeps them behind it. On x86 a plain load, after a locked add.
	_ = s.w.Load()
}

// EndWrite never takes from an in-flight count of 0 (an End without its
// Begin, or one whose write the next agent ended as a dead writer's,
// closeWritesInFlight): the subtraction would borrow from the count of
// writes done and leave 2^32-1 in flight, and the next BeginWrite's
// carry would then show none in flight while its write ran, so that the
// datapath trusted reads the write overlapped. It counts a write done
// alone instead, which only sends the reads around it guarded.
func (s *seqWord) EndWrite() {
	s.mu.RLock()
	defer s.mu.RUnlock()
	for {
		w := s.w.Load()
		next := w + SeqDone - 1
		if w&SeqInFlight == 0 {
			next = w + SeqDone
		}
		if s.w.CompareAndSwap(w, next) {
			return
		}
	}
}

func (s *seqWord) ebpfMap() *ebpf.Map { return s.em }

// closeMapping unmaps the kernel map's word, once no bracket adds to
// it; brackets after it add to a word of the heap, which nothing reads.
func (s *seqWord) closeMapping() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mem == nil {
		return nil
	}
	mem := s.mem
	s.mem, s.w = nil, new(atomic.Uint64)
	return unix.Munmap(mem)
}

// mapWord maps the kernel map's one word into memory.
func (s *seqWord) mapWord() error {
	mem, err := unix.Mmap(s.em.FD(), 0, unix.Getpagesize(), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return fmt.Errorf("%s: mmap: %w", s.name, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mem, s.w = mem, (*atomic.Uint64)(unsafe.Pointer(&mem[0]))
	return nil
}

// openServicesSeq maps m's lb_services_seq (a kernel map) and has
// m.Services bracket its writes with it.
func (m *Maps) openServicesSeq() error {
	s, ok := m.ServicesSeq.(*seqWord)
	if !ok || s.em == nil {
		return nil
	}
	if err := s.mapWord(); err != nil {
		return err
	}
	if ks, ok := m.Services.(*kernelServices); ok {
		ks.seq = s
	}
	return nil
}

// closeServicesSeq unmaps m's lb_services_seq, if a kernel map's.
func (m *Maps) closeServicesSeq() error {
	if s, ok := m.ServicesSeq.(*seqWord); ok {
		return s.closeMapping()
	}
	return nil
}

// closeWritesInFlight ends the writes a dead writer left in flight, by
// the same atomics the writers use: the caller holds the pin directory's
// lock, so no writer of ours is alive. A word left in flight would only
// keep every read guarded, never make one wrong; it returns how many.
func (s *seqWord) closeWritesInFlight() uint32 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	for {
		w := s.w.Load()
		n := uint32(w & SeqInFlight)
		if n == 0 || s.w.CompareAndSwap(w, w&^SeqInFlight+SeqDone) {
			return n
		}
	}
}
