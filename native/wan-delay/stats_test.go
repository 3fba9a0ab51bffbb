package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

func TestHistPercentile(t *testing.T) {
	var h Hist
	for i := 0; i < 98; i++ {
		h.Add(5_000) // 5 µs
	}
	h.Add(155_000) // 155 µs
	h.Add(-1_000)  // early counts as 0
	h.Add(1e12)    // far beyond the last bucket
	c := h.Drain()
	if got := Percentile(c, 0.5); got != 10 {
		t.Fatalf("p50 %v", got)
	}
	if got := Percentile(c, 0.99); got != 160 {
		t.Fatalf("p99 %v", got)
	}
	if got := Percentile(c, 1); got != float64(histBuckets*histBucketUs) {
		t.Fatalf("p100 %v", got)
	}
	if got := Percentile(h.Drain(), 0.99); got != 0 {
		t.Fatalf("drained hist must be empty, p99 %v", got)
	}
}

func TestParseNfnlQueue(t *testing.T) {
	kd := ParseNfnlQueue("    0  12345     3 2    64     5     7 99 1\n    1  12346     0 2    64     0     0 10 1\ngarbage\n")
	if kd[0] != 12 || kd[1] != 0 || len(kd) != 2 {
		t.Fatalf("%v", kd)
	}
}

func TestReportAndAtomicWrite(t *testing.T) {
	var qs QueueStats
	qs.Received.Store(10)
	qs.Accepted.Store(7)
	qs.DroppedLoss.Store(1)
	qs.SetDepth(5)
	qs.SetDepth(2)
	r := &Report{Version: 1, Pid: 1, Queues: map[string]QueueReport{
		"0": BuildQueueReport(&qs, []uint64{1}, 3),
		"1": {Received: 1, LateUsP99: 50},
	}}
	r.Totals = SumReports(r.Queues)
	if r.Queues["0"].MaxDepth != 5 || r.Queues["0"].Depth != 2 || r.Queues["0"].DroppedKernel != 3 {
		t.Fatalf("%+v", r.Queues["0"])
	}
	if r.Totals.Received != 11 || r.Totals.LateUsP99 != 50 {
		t.Fatalf("totals %+v", r.Totals)
	}
	path := filepath.Join(t.TempDir(), "stats.json")
	if err := WriteFileAtomic(path, MarshalReport(r)); err != nil {
		t.Fatal(err)
	}
	var back map[string]any
	data, _ := os.ReadFile(path)
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	q0 := back["queues"].(map[string]any)["0"].(map[string]any)
	for _, k := range []string{"received", "accepted", "dropped_loss", "dropped_overflow", "dropped_kernel", "depth", "max_depth", "late_us_p99"} {
		if _, ok := q0[k]; !ok {
			t.Errorf("missing key %s", k)
		}
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Fatalf("temp file left behind: %v", entries)
	}
}
