package main

// Counters, lateness histogram and the stats file.

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
)

// Lateness histogram: 10 µs buckets up to histMaxUs; the last bucket collects
// everything above.
const (
	histBucketUs = 10
	histMaxUs    = 10000
	histBuckets  = histMaxUs/histBucketUs + 1
)

// Hist is a lock-free histogram of release lateness, written by one loop and
// drained by the stats writer.
type Hist struct {
	b [histBuckets]atomic.Uint64
}

// Add records a lateness in nanoseconds (negative = early, counted as 0).
func (h *Hist) Add(lateNs int64) {
	us := lateNs / 1000
	if us < 0 {
		us = 0
	}
	i := us / histBucketUs
	if i >= histBuckets {
		i = histBuckets - 1
	}
	h.b[i].Add(1)
}

// Drain returns the counts and resets the histogram.
func (h *Hist) Drain() []uint64 {
	out := make([]uint64, histBuckets)
	for i := range h.b {
		out[i] = h.b[i].Swap(0)
	}
	return out
}

// Percentile returns the upper edge (µs) of the bucket holding quantile q of
// the counts, 0 when empty.
func Percentile(counts []uint64, q float64) float64 {
	var total uint64
	for _, c := range counts {
		total += c
	}
	if total == 0 {
		return 0
	}
	rank := uint64(q*float64(total) + 0.999999)
	if rank < 1 {
		rank = 1
	}
	var cum uint64
	for i, c := range counts {
		cum += c
		if cum >= rank {
			return float64((i + 1) * histBucketUs)
		}
	}
	return float64(len(counts) * histBucketUs)
}

// QueueStats are the live counters of one queue.
type QueueStats struct {
	Received        atomic.Uint64
	Accepted        atomic.Uint64
	DroppedLoss     atomic.Uint64
	DroppedOverflow atomic.Uint64
	Depth           atomic.Int64
	MaxDepth        atomic.Int64
	ENOBUFS         atomic.Uint64 // read errors: socket overflow events
	Late            Hist
}

// SetDepth updates the depth gauge and its high-water mark.
func (s *QueueStats) SetDepth(d int) {
	s.Depth.Store(int64(d))
	if int64(d) > s.MaxDepth.Load() {
		s.MaxDepth.Store(int64(d))
	}
}

// QueueReport is the JSON form of one queue's stats.
type QueueReport struct {
	Received        uint64  `json:"received"`
	Accepted        uint64  `json:"accepted"`
	DroppedLoss     uint64  `json:"dropped_loss"`
	DroppedOverflow uint64  `json:"dropped_overflow"`
	DroppedKernel   uint64  `json:"dropped_kernel"`
	Depth           int64   `json:"depth"`
	MaxDepth        int64   `json:"max_depth"`
	LateUsP99       float64 `json:"late_us_p99"`
	LateUsP50       float64 `json:"late_us_p50"`
}

// Report is the stats file document.
type Report struct {
	Version         int                    `json:"version"`
	Pid             int                    `json:"pid"`
	UptimeS         float64                `json:"uptime_s"`
	Queues          map[string]QueueReport `json:"queues"`
	Totals          QueueReport            `json:"totals"`
	TableGeneration uint64                 `json:"table_generation"`
}

// KernelDrops are the per-queue drop counters of
// /proc/net/netfilter/nfnetlink_queue (queue_dropped: queue full,
// user_dropped: netlink socket full / ENOBUFS).
type KernelDrops map[uint16]uint64

// ParseNfnlQueue parses the content of /proc/net/netfilter/nfnetlink_queue:
// queue_num peer_portid queue_total copy_mode copy_range queue_dropped
// user_dropped id_sequence 1
func ParseNfnlQueue(content string) KernelDrops {
	out := KernelDrops{}
	sc := bufio.NewScanner(strings.NewReader(content))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 7 {
			continue
		}
		q, err1 := strconv.ParseUint(f[0], 10, 16)
		qd, err2 := strconv.ParseUint(f[5], 10, 64)
		ud, err3 := strconv.ParseUint(f[6], 10, 64)
		if err1 != nil || err2 != nil || err3 != nil {
			continue
		}
		out[uint16(q)] = qd + ud
	}
	return out
}

func readKernelDrops() KernelDrops {
	b, err := os.ReadFile("/proc/net/netfilter/nfnetlink_queue")
	if err != nil {
		return nil
	}
	return ParseNfnlQueue(string(b))
}

// BuildQueueReport snapshots one queue. hist is the drained histogram.
func BuildQueueReport(s *QueueStats, hist []uint64, kdrop uint64) QueueReport {
	kd := kdrop
	if e := s.ENOBUFS.Load(); kd < e {
		kd = e // /proc unavailable: fall back to overflow events seen
	}
	return QueueReport{
		Received:        s.Received.Load(),
		Accepted:        s.Accepted.Load(),
		DroppedLoss:     s.DroppedLoss.Load(),
		DroppedOverflow: s.DroppedOverflow.Load(),
		DroppedKernel:   kd,
		Depth:           s.Depth.Load(),
		MaxDepth:        s.MaxDepth.Load(),
		LateUsP99:       Percentile(hist, 0.99),
		LateUsP50:       Percentile(hist, 0.50),
	}
}

// SumReports adds up queue reports; late_us_p99/p50 of the totals are the maximum
// over the queues (percentiles do not add).
func SumReports(qs map[string]QueueReport) QueueReport {
	var t QueueReport
	keys := make([]string, 0, len(qs))
	for k := range qs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		q := qs[k]
		t.Received += q.Received
		t.Accepted += q.Accepted
		t.DroppedLoss += q.DroppedLoss
		t.DroppedOverflow += q.DroppedOverflow
		t.DroppedKernel += q.DroppedKernel
		t.Depth += q.Depth
		t.MaxDepth += q.MaxDepth
		if q.LateUsP99 > t.LateUsP99 {
			t.LateUsP99 = q.LateUsP99
		}
		if q.LateUsP50 > t.LateUsP50 {
			t.LateUsP50 = q.LateUsP50
		}
	}
	return t
}

// WriteFileAtomic writes data to path via a temporary file and rename.
func WriteFileAtomic(path string, data []byte) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	if _, err := f.Write(data); err != nil {
		f.Close()
		os.Remove(tmp)
		return err
	}
	if err := f.Chmod(0o644); err != nil {
		f.Close()
		os.Remove(tmp)
		return err
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("rename %s: %w", path, err)
	}
	return nil
}

// MarshalReport renders the stats document.
func MarshalReport(r *Report) []byte {
	b, _ := json.MarshalIndent(r, "", " ")
	return append(b, '\n')
}
