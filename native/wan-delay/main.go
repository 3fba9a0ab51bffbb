// Command juice-wan-delay delays (and optionally drops) forwarded packets per
// (source site, destination site) pair using Linux NFQUEUE, as a replacement
// for sch_netem. See ../README.md for the contract.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

const version = "0.1.0"

var logMu sync.Mutex

func logf(format string, a ...any) {
	logMu.Lock()
	defer logMu.Unlock()
	fmt.Fprintf(os.Stderr, "juice-wan-delay: "+format+"\n", a...)
}

// Daemon owns the table, the queue loops and the stats file.
type Daemon struct {
	tablePath string
	statsPath string
	maxDepth  int
	table     atomic.Pointer[Table]
	gen       uint64
	start     time.Time

	mu    sync.Mutex
	loops map[uint16]*QueueLoop
	hists map[uint16][]uint64 // last drained lateness histogram per queue
}

// bindQueues starts a loop for every queue of t not yet bound.
func (d *Daemon) bindQueues(t *Table) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	var firstErr error
	for _, q := range t.Queues() {
		if _, ok := d.loops[q]; ok {
			continue
		}
		l, err := NewQueueLoop(q, &d.table, d.maxDepth, logf)
		if err != nil {
			logf("%v", err)
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		d.loops[q] = l
		l.Start()
	}
	return firstErr
}

func (d *Daemon) reload() {
	t, err := LoadTable(d.tablePath)
	if err != nil {
		logf("reload rejected, keeping generation %d: %v", d.gen, err)
		return
	}
	d.table.Store(t)
	d.gen++
	logf("table reloaded: generation %d, %d pairs, %d queues", d.gen, len(t.Pairs), len(t.Queues()))
	_ = d.bindQueues(t)
}

func (d *Daemon) writeStats() {
	if d.statsPath == "" {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	kd := readKernelDrops()
	r := &Report{
		Version: 1, Pid: os.Getpid(), UptimeS: time.Since(d.start).Seconds(),
		Queues: map[string]QueueReport{}, TableGeneration: d.gen,
	}
	qs := make([]uint16, 0, len(d.loops))
	for q := range d.loops {
		qs = append(qs, q)
	}
	sort.Slice(qs, func(i, j int) bool { return qs[i] < qs[j] })
	for _, q := range qs {
		l := d.loops[q]
		h := l.Stats.Late.Drain()
		var total uint64
		for _, c := range h {
			total += c
		}
		if total == 0 && d.hists[q] != nil {
			h = d.hists[q] // no release this interval: keep the last figure
		} else {
			d.hists[q] = h
		}
		r.Queues[strconv.Itoa(int(q))] = BuildQueueReport(l.Stats, h, kd[q])
	}
	r.Totals = SumReports(r.Queues)
	if err := WriteFileAtomic(d.statsPath, MarshalReport(r)); err != nil {
		logf("stats: %v", err)
	}
}

func (d *Daemon) stopAll() {
	d.mu.Lock()
	loops := make([]*QueueLoop, 0, len(d.loops))
	for _, l := range d.loops {
		loops = append(loops, l)
	}
	d.mu.Unlock()
	var wg sync.WaitGroup
	for _, l := range loops {
		wg.Add(1)
		go func(l *QueueLoop) { defer wg.Done(); l.Stop() }(l)
	}
	wg.Wait()
}

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	fs := flag.NewFlagSet("juice-wan-delay", flag.ContinueOnError)
	tablePath := fs.String("table", "", "table file (JSON)")
	statsPath := fs.String("stats", "", "stats file (JSON, written atomically)")
	interval := fs.Duration("stats-interval", time.Second, "stats write interval")
	pidfile := fs.String("pidfile", "", "pid file (written once all queues are bound)")
	maxDepth := fs.Int("max-depth", 100000, "max packets held per queue before dropping")
	showVersion := fs.Bool("version", false, "print version and exit")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *showVersion {
		fmt.Println("juice-wan-delay " + version)
		return 0
	}
	if fs.NArg() > 0 {
		logf("unexpected argument %q", fs.Arg(0))
		return 2
	}
	if *tablePath == "" {
		logf("--table is required")
		return 2
	}
	if *maxDepth < 1 {
		logf("--max-depth must be >= 1")
		return 2
	}
	if *interval <= 0 {
		logf("--stats-interval must be > 0")
		return 2
	}
	t, err := LoadTable(*tablePath)
	if err != nil {
		logf("bad table %s: %v", *tablePath, err)
		return 2
	}
	d := &Daemon{
		tablePath: *tablePath, statsPath: *statsPath, maxDepth: *maxDepth,
		gen: 1, start: time.Now(), loops: map[uint16]*QueueLoop{}, hists: map[uint16][]uint64{},
	}
	d.table.Store(t)

	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGHUP, syscall.SIGTERM, syscall.SIGINT)

	if err := d.bindQueues(t); err != nil {
		d.stopAll()
		return 1
	}
	if *pidfile != "" {
		if err := WriteFileAtomic(*pidfile, []byte(strconv.Itoa(os.Getpid())+"\n")); err != nil {
			logf("pidfile: %v", err)
			d.stopAll()
			return 1
		}
		defer os.Remove(*pidfile)
	}
	logf("running: %d pairs, queues %v, offset %d us", len(t.Pairs), t.Queues(), t.OffsetNs/1000)
	d.writeStats()

	tick := time.NewTicker(*interval)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
			d.writeStats()
		case sig := <-sigs:
			if sig == syscall.SIGHUP {
				d.reload()
				continue
			}
			logf("%v: releasing held packets and exiting", sig)
			d.stopAll()
			d.writeStats()
			return 0
		}
	}
}
