package main

import (
	"strings"
	"testing"
)

const goodTable = `{"version": 1, "site_octet": 2, "offset_us": 250,
 "pairs": [{"src": 1, "dst": 2, "queue": 0, "delay_us": 50000, "jitter_us": 0, "loss": 0.0},
           {"src": 2, "dst": 1, "queue": 1, "delay_us": 25000, "jitter_us": 1000, "loss": 0.5},
           {"src": 3, "dst": 1, "queue": 1, "delay_us": 0}]}`

func TestParseGoodTable(t *testing.T) {
	tb, err := ParseTable([]byte(goodTable))
	if err != nil {
		t.Fatal(err)
	}
	if tb.SiteOctet != 2 || tb.OffsetNs != 250000 {
		t.Fatalf("octet/offset: %d %d", tb.SiteOctet, tb.OffsetNs)
	}
	p := tb.Lookup(2, 1)
	if p == nil || p.Queue != 1 || p.DelayNs != 25e6 || p.JitterNs != 1e6 || p.Loss != 0.5 {
		t.Fatalf("pair 2->1: %+v", p)
	}
	if q := tb.Lookup(3, 1); q == nil || q.JitterNs != 0 || q.Loss != 0 {
		t.Fatalf("optional fields should default to 0: %+v", q)
	}
	if tb.Lookup(1, 3) != nil {
		t.Fatal("unknown pair must be nil")
	}
	qs := tb.Queues()
	if len(qs) != 2 || qs[0] != 0 || qs[1] != 1 {
		t.Fatalf("queues %v", qs)
	}
}

func TestDefaults(t *testing.T) {
	tb, err := ParseTable([]byte(`{"version":1,"pairs":[]}`))
	if err != nil {
		t.Fatal(err)
	}
	if tb.SiteOctet != 2 || tb.OffsetNs != DefaultOffsetUs*1000 || len(tb.Queues()) != 0 {
		t.Fatalf("defaults: %+v", tb)
	}
}

func TestBadTablesNameTheField(t *testing.T) {
	cases := []struct{ doc, field string }{
		{`[]`, "table"},
		{`{"pairs":[]}`, "version"},
		{`{"version":2,"pairs":[]}`, "version"},
		{`{"version":1}`, "pairs"},
		{`{"version":1,"pairs":{}}`, "pairs"},
		{`{"version":1,"site_octet":4,"pairs":[]}`, "site_octet"},
		{`{"version":1,"offset_us":-1,"pairs":[]}`, "offset_us"},
		{`{"version":1,"offset_us":"5","pairs":[]}`, "offset_us"},
		{`{"version":1,"bogus":1,"pairs":[]}`, "bogus"},
		{`{"version":1,"pairs":[{"src":1,"dst":2,"queue":0}]}`, "pairs[0].delay_us"},
		{`{"version":1,"pairs":[{"src":1,"dst":2,"queue":65536,"delay_us":1}]}`, "pairs[0].queue"},
		{`{"version":1,"pairs":[{"src":256,"dst":2,"queue":0,"delay_us":1}]}`, "pairs[0].src"},
		{`{"version":1,"pairs":[{"src":1,"dst":2,"queue":0,"delay_us":1.5}]}`, "pairs[0].delay_us"},
		{`{"version":1,"pairs":[{"src":1,"dst":2,"queue":0,"delay_us":-5}]}`, "pairs[0].delay_us"},
		{`{"version":1,"pairs":[{"src":1,"dst":2,"queue":0,"delay_us":5,"jitter_us":-1}]}`, "pairs[0].jitter_us"},
		{`{"version":1,"pairs":[{"src":1,"dst":2,"queue":0,"delay_us":5,"loss":1.5}]}`, "pairs[0].loss"},
		{`{"version":1,"pairs":[{"src":1,"dst":2,"queue":0,"delay_us":5,"loss":null}]}`, "pairs[0].loss"},
		{`{"version":1,"pairs":[{"src":1,"dst":2,"queue":0,"delay_us":5,"delay_ms":5}]}`, "pairs[0].delay_ms"},
		{`{"version":1,"pairs":[{"src":1,"dst":2,"queue":0,"delay_us":5},{"src":1,"dst":2,"queue":1,"delay_us":6}]}`, "pairs[1]"},
		{`{"version":1,"pairs":[5]}`, "pairs[0]"},
		{`{"version":1,"pairs":[]} {}`, "table"},
	}
	for _, c := range cases {
		_, err := ParseTable([]byte(c.doc))
		if err == nil {
			t.Errorf("%s: accepted", c.doc)
			continue
		}
		msg := err.Error()
		if !strings.HasPrefix(msg, c.field+":") {
			t.Errorf("%s: error %q does not start with field %q", c.doc, msg, c.field)
		}
		if strings.Contains(msg, "\n") {
			t.Errorf("%s: error must be one line: %q", c.doc, msg)
		}
	}
}
