package main

// Release scheduling for the packets held by one NFQUEUE queue.
//
// Pure logic: no clocks, no sockets. Times are int64 nanoseconds on any
// monotonic base chosen by the caller.
//
// Ordering rule (documented contract): packets of one (src, dst) pair are
// never reordered, even with jitter. A packet's release time is
//
//	max(previous release of that pair, arrival + max(0, max(0, delay+noise) - offset))
//
// so jitter only stretches gaps (like netem with a rate/ordering constraint),
// it never swaps packets. Consequently each pair's held packets form a FIFO
// sorted by release time.
//
// Verdicts: the kernel's NFQA batch verdict for id X applies to every packet
// still queued in that queue with id <= X (the kernel walks its queue list,
// which is in id order, from the head). A batch is therefore only correct when
// the released packets are exactly the oldest held packets of the queue. The
// scheduler tracks arrival order of all held packets and emits one batch
// verdict for the released prefix, and single verdicts for released packets
// that are not part of it (possible when pairs with different delays share a
// queue).

import "math/rand/v2"

// Action is the decision taken for a newly received packet.
type Action int

const (
	ActHold         Action = iota // held until its release time
	ActAcceptNow                  // accepted immediately (unknown pair, zero delay with nothing held)
	ActDropLoss                   // dropped by random loss
	ActDropOverflow               // dropped because the queue holds max-depth packets
)

// Verdict is one verdict to send to the kernel.
type Verdict struct {
	ID     uint32
	Accept bool
	Batch  bool // batch verdict: applies to all queued ids <= ID
}

// ring is a growable FIFO ring buffer.
type ring[T any] struct {
	buf        []T
	head, size int
}

func (r *ring[T]) Len() int { return r.size }

func (r *ring[T]) Push(v T) {
	if r.size == len(r.buf) {
		n := len(r.buf) * 2
		if n < 16 {
			n = 16
		}
		nb := make([]T, n)
		for i := 0; i < r.size; i++ {
			nb[i] = r.buf[(r.head+i)%len(r.buf)]
		}
		r.buf, r.head = nb, 0
	}
	r.buf[(r.head+r.size)%len(r.buf)] = v
	r.size++
}

// At returns a pointer to the i-th element from the head.
func (r *ring[T]) At(i int) *T { return &r.buf[(r.head+i)%len(r.buf)] }

func (r *ring[T]) Pop() T {
	v := r.buf[r.head]
	var zero T
	r.buf[r.head] = zero
	r.head = (r.head + 1) % len(r.buf)
	r.size--
	return v
}

const (
	stHeld uint8 = iota
	stDue
	stDone
)

type arrival struct {
	id    uint32
	state uint8
}

type heldPkt struct {
	seq     uint64 // arrival sequence number within the queue
	release int64
}

type pairState struct {
	fifo        ring[heldPkt]
	lastRelease int64
	active      bool // member of Sched.active
}

// Sched holds the packets of one queue.
type Sched struct {
	pairs   map[uint16]*pairState
	active  []*pairState // pairs with held packets
	arr     ring[arrival]
	headSeq uint64 // sequence number of arr's head
	nextSeq uint64
	depth   int
	rng     *rand.Rand
	dueBuf  []uint64
}

// NewSched creates a scheduler; rng drives loss and jitter.
func NewSched(rng *rand.Rand) *Sched {
	return &Sched{pairs: map[uint16]*pairState{}, rng: rng}
}

// Depth is the number of packets currently held.
func (s *Sched) Depth() int { return s.depth }

// ReleaseTime computes a packet's release time (see the package comment).
func ReleaseTime(arrival, delayNs, noiseNs, offsetNs, prevRelease int64) int64 {
	d := delayNs + noiseNs
	if d < 0 {
		d = 0
	}
	d -= offsetNs
	if d < 0 {
		d = 0
	}
	t := arrival + d
	if t < prevRelease {
		t = prevRelease
	}
	return t
}

// Admit decides what to do with a packet that arrived at `now`. p is nil for
// unknown pairs. When the result is ActHold the packet is queued and the
// caller must not send a verdict; otherwise the caller sends the verdict.
func (s *Sched) Admit(id uint32, key uint16, p *PairParams, now, offsetNs int64, maxDepth int) (Action, int64) {
	if p == nil {
		return ActAcceptNow, now
	}
	if p.Loss > 0 && s.rng.Float64() < p.Loss {
		return ActDropLoss, now
	}
	ps := s.pairs[key]
	if ps == nil {
		ps = &pairState{}
		s.pairs[key] = ps
	}
	var noise int64
	if p.JitterNs > 0 {
		noise = int64(s.rng.NormFloat64() * float64(p.JitterNs))
	}
	rel := ReleaseTime(now, p.DelayNs, noise, offsetNs, ps.lastRelease)
	if rel <= now && ps.fifo.Len() == 0 {
		// Nothing to wait for: pass straight through.
		ps.lastRelease = rel
		return ActAcceptNow, rel
	}
	if s.depth >= maxDepth {
		return ActDropOverflow, now
	}
	ps.lastRelease = rel
	ps.fifo.Push(heldPkt{seq: s.nextSeq, release: rel})
	s.arr.Push(arrival{id: id})
	s.nextSeq++
	s.depth++
	if !ps.active {
		ps.active = true
		s.active = append(s.active, ps)
	}
	return ActHold, rel
}

// Next returns the earliest release time of the held packets.
func (s *Sched) Next() (int64, bool) {
	var best int64
	found := false
	for _, ps := range s.active {
		if r := ps.fifo.At(0).release; !found || r < best {
			best, found = r, true
		}
	}
	return best, found
}

// Release releases every held packet whose release time is <= limit,
// appending the ACCEPT verdicts to out. late is called with each released
// packet's release time (for lateness statistics); it may be nil.
func (s *Sched) Release(limit int64, out []Verdict, late func(release int64)) []Verdict {
	due := s.dueBuf[:0]
	kept := s.active[:0]
	for _, ps := range s.active {
		for ps.fifo.Len() > 0 && ps.fifo.At(0).release <= limit {
			h := ps.fifo.Pop()
			s.arr.At(int(h.seq - s.headSeq)).state = stDue
			due = append(due, h.seq)
			if late != nil {
				late(h.release)
			}
		}
		if ps.fifo.Len() > 0 {
			kept = append(kept, ps)
		} else {
			ps.active = false
		}
	}
	for i := len(kept); i < len(s.active); i++ {
		s.active[i] = nil
	}
	s.active = kept
	s.dueBuf = due
	if len(due) == 0 {
		return out
	}
	s.depth -= len(due)
	out = s.verdictsFor(due, out)
	return out
}

// verdictsFor turns packets marked stDue into verdicts: one batch verdict for
// the due packets that form the oldest prefix of the queue, single verdicts
// for the rest.
func (s *Sched) verdictsFor(due []uint64, out []Verdict) []Verdict {
	var batchID uint32
	inBatch := 0
	for s.arr.Len() > 0 && s.arr.At(0).state != stHeld {
		a := s.arr.Pop()
		s.headSeq++
		if a.state == stDue {
			batchID = a.id
			inBatch++
		}
	}
	if inBatch > 0 {
		out = append(out, Verdict{ID: batchID, Accept: true, Batch: inBatch > 1})
	}
	if inBatch < len(due) {
		for _, seq := range due {
			if seq < s.headSeq {
				continue // covered by the batch
			}
			a := s.arr.At(int(seq - s.headSeq))
			out = append(out, Verdict{ID: a.id, Accept: true})
			a.state = stDone
		}
	}
	return out
}

// ReleaseAll releases every held packet at once (shutdown).
func (s *Sched) ReleaseAll(out []Verdict) []Verdict {
	return s.Release(int64(^uint64(0)>>1), out, nil)
}
