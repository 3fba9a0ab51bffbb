package main

// Per-queue event loop. Each bound queue gets one goroutine locked to its own
// OS thread which waits in ppoll(2) on three descriptors:
//
//	the netlink socket (packets), a timerfd (next release), an eventfd (stop).
//
// Reading, scheduling and verdicts all happen on that thread, so there is no
// locking on the hot path and nothing runs while idle (ppoll with no timeout,
// timer disarmed when nothing is held).
//
// Timer strategy: timerfd (hrtimer) wake-ups on this VM land ~40 µs late with
// a tight spread, far better than Go's runtime timers (~200 µs, long tail).
// The loop arms the timer `early` ns before the next release, where `early`
// is a running average of the observed timer overshoot, then releases every
// packet due within releaseSlack. If it woke more than releaseSlack early it
// busy-waits for at most spinMax, otherwise re-arms.

import (
	"math/rand/v2"
	"runtime"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

const (
	releaseSlack = 15 * time.Microsecond
	spinMax      = 100 * time.Microsecond
	maxEarly     = 300 * time.Microsecond
	stageMargin  = 1 * time.Millisecond
	readBurst    = 512 // packets read before checking the release schedule
	drainQuiet   = 20 * time.Millisecond
	drainMax     = 200 * time.Millisecond
)

var monoBase = time.Now()

// monoNow is the loop clock: nanoseconds since process start (monotonic).
func monoNow() int64 { return int64(time.Since(monoBase)) }

// QueueLoop runs one queue.
type QueueLoop struct {
	Queue    uint16
	nfq      *Nfq
	table    *atomic.Pointer[Table]
	maxDepth int
	Stats    *QueueStats

	tfd, efd int
	stopping atomic.Bool
	done     chan struct{}
	logf     func(format string, a ...any)
}

// NewQueueLoop binds the queue and prepares the loop (not started).
func NewQueueLoop(q uint16, table *atomic.Pointer[Table], maxDepth int, logf func(string, ...any)) (*QueueLoop, error) {
	ql := uint32(maxDepth) + 4096
	if ql < 100000 {
		ql = 100000
	}
	nfq, err := OpenNfq(NfqConfig{Queue: q, MaxQueueLen: ql, RcvBuf: 32 << 20, GSO: true})
	if err != nil {
		return nil, err
	}
	tfd, err := unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_CLOEXEC|unix.TFD_NONBLOCK)
	if err != nil {
		nfq.Close()
		return nil, err
	}
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		nfq.Close()
		unix.Close(tfd)
		return nil, err
	}
	return &QueueLoop{
		Queue: q, nfq: nfq, table: table, maxDepth: maxDepth, Stats: &QueueStats{},
		tfd: tfd, efd: efd, done: make(chan struct{}), logf: logf,
	}, nil
}

// Start runs the loop in the background.
func (l *QueueLoop) Start() { go l.run() }

// Stop asks the loop to accept everything it holds, drain briefly and exit;
// it returns when the loop has finished and the socket is closed.
func (l *QueueLoop) Stop() {
	l.stopping.Store(true)
	var one [8]byte
	one[0] = 1
	unix.Write(l.efd, one[:])
	<-l.done
}

func (l *QueueLoop) run() {
	runtime.LockOSThread()
	defer close(l.done)
	// Keep timer slack minimal for this thread (default 50 µs).
	_ = unix.Prctl(unix.PR_SET_TIMERSLACK, 1, 0, 0, 0)

	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), uint64(l.Queue)+0x9e3779b97f4a7c15))
	s := NewSched(rng)
	st := l.Stats
	buf := make([]byte, 256*1024)
	var verdicts []Verdict
	early := int64(40 * time.Microsecond) // initial guess, adapted below
	var armedAt int64                     // time the timer is armed for (0 = disarmed)
	var now int64

	queue := func(v Verdict) {
		if err := l.nfq.QueueVerdict(v); err != nil {
			l.logf("queue %d: verdict send: %v", l.Queue, err)
		}
	}
	flush := func() {
		if err := l.nfq.Flush(); err != nil {
			l.logf("queue %d: verdict send: %v", l.Queue, err)
		}
	}

	var tbl *Table
	onPacket := func(pm PacketMsg) {
		st.Received.Add(1)
		if l.stopping.Load() {
			queue(Verdict{ID: pm.ID, Accept: true})
			st.Accepted.Add(1)
			return
		}
		var p *PairParams
		var key uint16
		if src, dst, ok := SitesOf(pm.Payload, tbl.SiteOctet); ok {
			p = tbl.Lookup(src, dst)
			key = PairKey(src, dst)
		}
		act, _ := s.Admit(pm.ID, key, p, now, tbl.OffsetNs, l.maxDepth)
		switch act {
		case ActAcceptNow:
			queue(Verdict{ID: pm.ID, Accept: true})
			st.Accepted.Add(1)
		case ActDropLoss:
			queue(Verdict{ID: pm.ID, Accept: false})
			st.DroppedLoss.Add(1)
		case ActDropOverflow:
			queue(Verdict{ID: pm.ID, Accept: false})
			st.DroppedOverflow.Add(1)
		}
	}
	verdictErrs := 0
	onError := func(errno int32) {
		// A failed verdict (e.g. ENOENT for an unknown id) should not
		// happen; report the first few so a bug does not go unnoticed.
		verdictErrs++
		if verdictErrs <= 5 {
			l.logf("queue %d: kernel rejected a verdict: %v", l.Queue, unix.Errno(-errno))
		}
	}

	var relNow int64
	lateFn := func(rel int64) { st.Late.Add(relNow - rel) }
	release := func() {
		relNow = monoNow()
		before := s.Depth()
		verdicts = s.Release(relNow+int64(releaseSlack), verdicts[:0], lateFn)
		for _, v := range verdicts {
			queue(v)
		}
		st.Accepted.Add(uint64(before - s.Depth()))
	}
	timerFired := false
	armedFinal := false

	fds := []unix.PollFd{
		{Fd: int32(l.nfq.Fd()), Events: unix.POLLIN},
		{Fd: int32(l.tfd), Events: unix.POLLIN},
		{Fd: int32(l.efd), Events: unix.POLLIN},
	}
	var tbuf [8]byte
	for {
		// 1. Read what is available (bounded burst).
		tbl = l.table.Load()
		for n := 0; n < readBurst; n++ {
			r, err := unix.Read(l.nfq.Fd(), buf)
			if err != nil {
				if err == unix.EINTR {
					continue
				}
				if err == unix.ENOBUFS {
					st.ENOBUFS.Add(1)
					continue
				}
				if err != unix.EAGAIN {
					l.logf("queue %d: read: %v", l.Queue, err)
				}
				break
			}
			now = monoNow()
			ParseMessages(buf[:r], onPacket, onError)
		}
		if l.stopping.Load() {
			l.shutdown(s, buf, onPacket, onError)
			return
		}
		// 2. Release what is due. Pending immediate verdicts are already in
		// the buffer ahead of any batch verdict, as required.
		release()
		if next, ok := s.Next(); ok {
			if d := next - monoNow(); d > int64(releaseSlack) && d <= int64(spinMax) && timerFired {
				// Timer fired early relative to the packet: short spin.
				flush()
				for monoNow() < next-int64(releaseSlack) {
				}
				release()
			}
		}
		flush()
		st.SetDepth(s.Depth())

		// 3. Arm the timer for the next release. Long waits are split: a
		// first wake-up stageMargin before the target (long sleeps wake up
		// later, by a varying amount, on a VM), then a short final timer
		// whose overshoot is small and steady enough to be learnt.
		if next, ok := s.Next(); ok {
			want := next - early
			n := monoNow()
			final := true
			if want-n > int64(2*stageMargin) {
				want = next - int64(stageMargin)
				final = false
			}
			if want != armedAt {
				rel := want - n
				if rel < 1000 {
					rel = 1000
				}
				its := unix.ItimerSpec{Value: unix.NsecToTimespec(rel)}
				unix.TimerfdSettime(l.tfd, 0, &its, nil)
				armedAt = want
				armedFinal = final
			}
		} else if armedAt != 0 {
			unix.TimerfdSettime(l.tfd, 0, &unix.ItimerSpec{}, nil)
			armedAt = 0
		}

		// 4. Wait.
		timerFired = false
		for i := range fds {
			fds[i].Revents = 0
		}
		if _, err := unix.Ppoll(fds, nil, nil); err != nil && err != unix.EINTR {
			l.logf("queue %d: ppoll: %v", l.Queue, err)
			time.Sleep(time.Millisecond)
		}
		if fds[1].Revents&unix.POLLIN != 0 {
			woke := monoNow()
			if _, err := unix.Read(l.tfd, tbuf[:]); err == nil && armedAt != 0 {
				over := woke - armedAt
				if armedFinal && over >= 0 && over < int64(maxEarly) {
					early += (over - early) / 8
				}
				armedAt = 0
				timerFired = true
			}
		}
		if fds[2].Revents&unix.POLLIN != 0 {
			unix.Read(l.efd, tbuf[:])
		}
	}
}

// shutdown accepts every held packet, keeps accepting new arrivals until the
// socket has been quiet for drainQuiet (at most drainMax), then closes.
func (l *QueueLoop) shutdown(s *Sched, buf []byte, onPacket func(PacketMsg), onError func(int32)) {
	st := l.Stats
	before := s.Depth()
	for _, v := range s.ReleaseAll(nil) {
		l.nfq.QueueVerdict(v)
	}
	st.Accepted.Add(uint64(before))
	l.nfq.Flush()
	st.SetDepth(0)
	start := time.Now()
	lastPkt := start
	fds := []unix.PollFd{{Fd: int32(l.nfq.Fd()), Events: unix.POLLIN}}
	for time.Since(start) < drainMax && time.Since(lastPkt) < drainQuiet {
		ts := unix.NsecToTimespec(int64(5 * time.Millisecond))
		unix.Ppoll(fds, &ts, nil)
		for {
			r, err := unix.Read(l.nfq.Fd(), buf)
			if err == unix.EINTR || err == unix.ENOBUFS {
				continue
			}
			if err != nil {
				break
			}
			lastPkt = time.Now()
			ParseMessages(buf[:r], onPacket, onError)
		}
		l.nfq.Flush()
	}
	l.nfq.Close()
	unix.Close(l.tfd)
	unix.Close(l.efd)
}
