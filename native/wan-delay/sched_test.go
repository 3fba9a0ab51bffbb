package main

import (
	"math/rand/v2"
	"testing"
)

func newTestSched(seed uint64) *Sched { return NewSched(rand.New(rand.NewPCG(seed, 1))) }

func TestReleaseTime(t *testing.T) {
	cases := []struct {
		name                                string
		arrival, delay, noise, offset, prev int64
		want                                int64
	}{
		{"plain", 1000, 500, 0, 0, 0, 1500},
		{"offset subtracted", 1000, 500, 0, 100, 0, 1400},
		{"offset never before arrival", 1000, 50, 0, 100, 0, 1000},
		{"noise added", 1000, 500, 200, 0, 0, 1700},
		{"negative noise clipped to zero delay", 1000, 500, -800, 0, 0, 1000},
		{"no reorder: previous release wins", 1000, 500, -300, 0, 1600, 1600},
		{"later than previous", 1000, 500, 0, 0, 1200, 1500},
	}
	for _, c := range cases {
		if got := ReleaseTime(c.arrival, c.delay, c.noise, c.offset, c.prev); got != c.want {
			t.Errorf("%s: got %d want %d", c.name, got, c.want)
		}
	}
}

func TestConstantDelayBatches(t *testing.T) {
	s := newTestSched(1)
	p := &PairParams{Src: 1, Dst: 2, DelayNs: 1000}
	k := PairKey(1, 2)
	for i := 0; i < 5; i++ {
		act, rel := s.Admit(uint32(10+i), k, p, int64(i*100), 0, 100)
		if act != ActHold || rel != int64(i*100+1000) {
			t.Fatalf("pkt %d: %v %d", i, act, rel)
		}
	}
	if n, ok := s.Next(); !ok || n != 1000 {
		t.Fatalf("next %d %v", n, ok)
	}
	if v := s.Release(999, nil, nil); len(v) != 0 {
		t.Fatalf("released early: %v", v)
	}
	var lates []int64
	v := s.Release(1250, nil, func(r int64) { lates = append(lates, r) })
	if len(v) != 1 || v[0] != (Verdict{ID: 12, Accept: true, Batch: true}) {
		t.Fatalf("want one batch up to id 12, got %+v", v)
	}
	if len(lates) != 3 || lates[0] != 1000 || lates[2] != 1200 {
		t.Fatalf("late callback release times %v", lates)
	}
	if s.Depth() != 2 {
		t.Fatalf("depth %d", s.Depth())
	}
	v = s.Release(1300, nil, nil)
	if len(v) != 1 || v[0] != (Verdict{ID: 13, Accept: true}) {
		t.Fatalf("single packet due should be a plain verdict: %+v", v)
	}
	v = s.ReleaseAll(nil)
	if len(v) != 1 || v[0].ID != 14 || s.Depth() != 0 {
		t.Fatalf("release all: %+v depth %d", v, s.Depth())
	}
	if _, ok := s.Next(); ok {
		t.Fatal("nothing should be held")
	}
}

func TestOffsetApplied(t *testing.T) {
	s := newTestSched(1)
	p := &PairParams{DelayNs: 5000}
	_, rel := s.Admit(1, 1, p, 100, 250, 10)
	if rel != 100+5000-250 {
		t.Fatalf("release %d", rel)
	}
	// offset larger than the delay: released on arrival, not earlier.
	act, rel := s.Admit(2, 2, &PairParams{DelayNs: 100}, 100, 250, 10)
	if act != ActAcceptNow || rel != 100 {
		t.Fatalf("tiny delay: %v %d", act, rel)
	}
}

func TestMixedDelaysFallBackToSingles(t *testing.T) {
	s := newTestSched(1)
	slow := &PairParams{DelayNs: 1000}
	fast := &PairParams{DelayNs: 100}
	s.Admit(1, PairKey(1, 2), slow, 0, 0, 100)  // rel 1000
	s.Admit(2, PairKey(2, 1), fast, 0, 0, 100)  // rel 100
	s.Admit(3, PairKey(1, 2), slow, 10, 0, 100) // rel 1010
	s.Admit(4, PairKey(2, 1), fast, 10, 0, 100) // rel 110
	v := s.Release(200, nil, nil)
	if len(v) != 2 || v[0].Batch || v[1].Batch || v[0].ID+v[1].ID != 6 {
		t.Fatalf("fast pair must be released by single verdicts: %+v", v)
	}
	v = s.Release(2000, nil, nil)
	if len(v) != 1 || v[0] != (Verdict{ID: 3, Accept: true, Batch: true}) {
		t.Fatalf("slow pair is now the whole queue: %+v", v)
	}
}

func TestJitterNeverReorders(t *testing.T) {
	s := newTestSched(7)
	p := &PairParams{DelayNs: 10000, JitterNs: 8000}
	k := PairKey(1, 2)
	var rels []int64
	distinct := map[int64]bool{}
	for i := 0; i < 2000; i++ {
		act, rel := s.Admit(uint32(i), k, p, int64(i*50), 0, 1<<30)
		if act == ActHold {
			rels = append(rels, rel)
			distinct[rel-int64(i*50)] = true
		}
	}
	for i := 1; i < len(rels); i++ {
		if rels[i] < rels[i-1] {
			t.Fatalf("release %d (%d) before previous (%d)", i, rels[i], rels[i-1])
		}
	}
	if len(distinct) < 100 {
		t.Fatalf("jitter has no effect: %d distinct delays", len(distinct))
	}
	// Released in id order.
	var ids []uint32
	for limit := int64(0); s.Depth() > 0; limit += 3000 {
		for _, v := range s.Release(limit, nil, nil) {
			ids = append(ids, v.ID)
		}
	}
	for i := 1; i < len(ids); i++ {
		if ids[i] <= ids[i-1] {
			t.Fatalf("verdict ids not increasing: %v", ids[i-1:i+1])
		}
	}
}

func TestLossAndOverflowAndUnknown(t *testing.T) {
	s := newTestSched(3)
	if act, _ := s.Admit(1, 0, nil, 0, 0, 10); act != ActAcceptNow {
		t.Fatal("unknown pair must be accepted immediately")
	}
	lossy := &PairParams{DelayNs: 1000, Loss: 1}
	if act, _ := s.Admit(2, 1, lossy, 0, 0, 10); act != ActDropLoss {
		t.Fatal("loss=1 must drop")
	}
	half := &PairParams{DelayNs: 1000, Loss: 0.5}
	drops := 0
	for i := 0; i < 10000; i++ {
		if act, _ := s.Admit(uint32(i), 2, half, 0, 0, 1<<30); act == ActDropLoss {
			drops++
		}
	}
	if drops < 4500 || drops > 5500 {
		t.Fatalf("loss 0.5 dropped %d of 10000", drops)
	}
	s2 := newTestSched(3)
	p := &PairParams{DelayNs: 1000}
	s2.Admit(1, 1, p, 0, 0, 2)
	s2.Admit(2, 1, p, 0, 0, 2)
	if act, _ := s2.Admit(3, 1, p, 0, 0, 2); act != ActDropOverflow || s2.Depth() != 2 {
		t.Fatalf("overflow: %v depth %d", act, s2.Depth())
	}
}

func TestZeroDelayKeepsOrderBehindHeldPackets(t *testing.T) {
	s := newTestSched(1)
	k := PairKey(1, 2)
	s.Admit(1, k, &PairParams{DelayNs: 1000}, 0, 0, 10)
	// Table reloaded to zero delay while packet 1 is held.
	act, rel := s.Admit(2, k, &PairParams{DelayNs: 0}, 10, 0, 10)
	if act != ActHold || rel != 1000 {
		t.Fatalf("must queue behind held packet: %v %d", act, rel)
	}
	if act, _ := s.Admit(3, PairKey(2, 1), &PairParams{DelayNs: 0}, 10, 0, 10); act != ActAcceptNow {
		t.Fatal("idle zero-delay pair passes straight through")
	}
}

// fakeKernel models nfnetlink_queue's verdict semantics for one queue.
type fakeKernel struct {
	queue []uint32 // ids in arrival order
}

func (k *fakeKernel) apply(t *testing.T, v Verdict) []uint32 {
	var out []uint32
	if v.Batch {
		for len(k.queue) > 0 && int32(k.queue[0]-v.ID) <= 0 {
			out = append(out, k.queue[0])
			k.queue = k.queue[1:]
		}
		return out
	}
	for i, id := range k.queue {
		if id == v.ID {
			k.queue = append(k.queue[:i], k.queue[i+1:]...)
			return []uint32{id}
		}
	}
	t.Fatalf("verdict for unknown id %d (ENOENT)", v.ID)
	return nil
}

// Random mixes of pairs, delays, jitter and loss, checked against the
// kernel model: every held packet is released exactly once, never before its
// release time, and pending immediate verdicts never race a batch.
func TestRandomMixAgainstKernelModel(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		r := rand.New(rand.NewPCG(seed, 99))
		s := newTestSched(seed)
		kern := &fakeKernel{}
		pairs := []*PairParams{
			{DelayNs: 5000}, {DelayNs: 5000, JitterNs: 2000}, {DelayNs: 500, Loss: 0.2}, {DelayNs: 20000},
		}
		npairs := 1 + int(seed%4)
		release := map[uint32]int64{}
		done := map[uint32]bool{}
		var now int64
		id := uint32(0xfffffff0) // exercise id wrap-around
		for step := 0; step < 3000; step++ {
			now += int64(r.IntN(400))
			pi := r.IntN(npairs)
			id++
			kern.queue = append(kern.queue, id)
			act, rel := s.Admit(id, uint16(pi), pairs[pi], now, 100, 1<<30)
			if act != ActHold {
				kern.apply(t, Verdict{ID: id}) // immediate single verdict
				continue
			}
			release[id] = rel
			if r.IntN(4) == 0 {
				for _, v := range s.Release(now, nil, nil) {
					for _, got := range kern.apply(t, v) {
						if done[got] {
							t.Fatalf("seed %d: id %d released twice", seed, got)
						}
						if release[got] > now {
							t.Fatalf("seed %d: id %d released at %d before %d", seed, got, now, release[got])
						}
						done[got] = true
					}
				}
			}
		}
		for _, v := range s.ReleaseAll(nil) {
			for _, got := range kern.apply(t, v) {
				done[got] = true
			}
		}
		if len(kern.queue) != 0 || len(done) != len(release) || s.Depth() != 0 {
			t.Fatalf("seed %d: kernel left %d, released %d of %d, depth %d",
				seed, len(kern.queue), len(done), len(release), s.Depth())
		}
	}
}
