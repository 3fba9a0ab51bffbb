package main

// Table file parsing and validation.
//
// The table is written by the Python side; any problem is reported as a
// one-line error naming the offending field (e.g. `pairs[3].delay_us: must be
// an integer >= 0`).

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"sort"
)

// DefaultOffsetUs is used when the table has no "offset_us" field. It was
// measured on the reference machine (see README.md): the fixed per-direction
// overhead of the NFQUEUE round trip plus event-loop wake-up.
const DefaultOffsetUs = 100

// MaxDelayUs bounds delay_us and jitter_us (1 hour) to keep arithmetic sane.
const MaxDelayUs = 3600 * 1000 * 1000

// PairParams is the emulation applied to packets of one (src, dst) site pair.
type PairParams struct {
	Src, Dst int
	Queue    uint16
	DelayNs  int64
	JitterNs int64
	Loss     float64
}

// Table is an immutable, validated table. Loops read it through an atomic
// pointer, so a reload swaps the whole table at once.
type Table struct {
	SiteOctet int
	OffsetNs  int64
	Pairs     []PairParams
	byKey     map[uint16]*PairParams
}

// PairKey packs a (src, dst) site pair into a map key.
func PairKey(src, dst uint8) uint16 { return uint16(src)<<8 | uint16(dst) }

// Lookup returns the parameters of a pair, or nil if the pair is unknown.
func (t *Table) Lookup(src, dst uint8) *PairParams {
	if t == nil {
		return nil
	}
	return t.byKey[PairKey(src, dst)]
}

// Queues returns the distinct queue numbers of the table, sorted.
func (t *Table) Queues() []uint16 {
	seen := map[uint16]bool{}
	var qs []uint16
	for _, p := range t.Pairs {
		if !seen[p.Queue] {
			seen[p.Queue] = true
			qs = append(qs, p.Queue)
		}
	}
	sort.Slice(qs, func(i, j int) bool { return qs[i] < qs[j] })
	return qs
}

// LoadTable reads and validates a table file.
func LoadTable(path string) (*Table, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("table: %v", err)
	}
	return ParseTable(data)
}

type fieldErr struct{ field, msg string }

func (e *fieldErr) Error() string { return e.field + ": " + e.msg }

func ferr(field, format string, a ...any) error {
	return &fieldErr{field: field, msg: fmt.Sprintf(format, a...)}
}

// decodeObject decodes a JSON object keeping numbers exact.
func decodeObject(raw []byte, field string) (map[string]json.RawMessage, error) {
	var m map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(&m); err != nil || m == nil {
		if err == nil {
			err = fmt.Errorf("null")
		}
		return nil, ferr(field, "must be a JSON object (%v)", err)
	}
	if dec.More() {
		return nil, ferr(field, "trailing data after JSON object")
	}
	return m, nil
}

func getNumber(m map[string]json.RawMessage, key, field string) (float64, bool, error) {
	raw, ok := m[key]
	if !ok {
		return 0, false, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return 0, true, ferr(field, "must be a number")
	}
	n, isNum := v.(json.Number)
	if !isNum {
		return 0, true, ferr(field, "must be a number, got %s", string(raw))
	}
	f, err := n.Float64()
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, true, ferr(field, "must be a finite number")
	}
	return f, true, nil
}

// getInt reads an integer field in [lo, hi]. A missing field yields def when
// required is false.
func getInt(m map[string]json.RawMessage, key, field string, lo, hi int64, required bool, def int64) (int64, error) {
	f, present, err := getNumber(m, key, field)
	if err != nil {
		return 0, err
	}
	if !present {
		if required {
			return 0, ferr(field, "missing")
		}
		return def, nil
	}
	if f != math.Trunc(f) || f < float64(lo) || f > float64(hi) {
		return 0, ferr(field, "must be an integer in [%d, %d], got %s", lo, hi, string(m[key]))
	}
	return int64(f), nil
}

func checkKeys(m map[string]json.RawMessage, field string, allowed ...string) error {
	ok := map[string]bool{}
	for _, a := range allowed {
		ok[a] = true
	}
	var unknown []string
	for k := range m {
		if !ok[k] {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		prefix := field + "."
		if field == "" {
			prefix = ""
		}
		return ferr(prefix+unknown[0], "unknown field")
	}
	return nil
}

// ParseTable validates a table document.
func ParseTable(data []byte) (*Table, error) {
	top, err := decodeObject(data, "table")
	if err != nil {
		return nil, err
	}
	if err := checkKeys(top, "", "version", "site_octet", "offset_us", "pairs"); err != nil {
		return nil, err
	}
	ver, err := getInt(top, "version", "version", 1, 1, true, 0)
	if err != nil {
		return nil, err
	}
	_ = ver
	octet, err := getInt(top, "site_octet", "site_octet", 0, 3, false, 2)
	if err != nil {
		return nil, err
	}
	offset, err := getInt(top, "offset_us", "offset_us", 0, 1000000, false, DefaultOffsetUs)
	if err != nil {
		return nil, err
	}
	t := &Table{SiteOctet: int(octet), OffsetNs: offset * 1000, byKey: map[uint16]*PairParams{}}

	rawPairs, ok := top["pairs"]
	if !ok {
		return nil, ferr("pairs", "missing")
	}
	var list []json.RawMessage
	if err := json.Unmarshal(rawPairs, &list); err != nil || list == nil {
		return nil, ferr("pairs", "must be a JSON array")
	}
	t.Pairs = make([]PairParams, 0, len(list))
	seen := map[uint16]bool{}
	for i, raw := range list {
		f := fmt.Sprintf("pairs[%d]", i)
		m, err := decodeObject(raw, f)
		if err != nil {
			return nil, err
		}
		if err := checkKeys(m, f, "src", "dst", "queue", "delay_us", "jitter_us", "loss"); err != nil {
			return nil, err
		}
		src, err := getInt(m, "src", f+".src", 0, 255, true, 0)
		if err != nil {
			return nil, err
		}
		dst, err := getInt(m, "dst", f+".dst", 0, 255, true, 0)
		if err != nil {
			return nil, err
		}
		q, err := getInt(m, "queue", f+".queue", 0, 65535, true, 0)
		if err != nil {
			return nil, err
		}
		delay, err := getInt(m, "delay_us", f+".delay_us", 0, MaxDelayUs, true, 0)
		if err != nil {
			return nil, err
		}
		jitter, err := getInt(m, "jitter_us", f+".jitter_us", 0, MaxDelayUs, false, 0)
		if err != nil {
			return nil, err
		}
		loss, present, err := getNumber(m, "loss", f+".loss")
		if err != nil {
			return nil, err
		}
		if present && (loss < 0 || loss > 1) {
			return nil, ferr(f+".loss", "must be in [0, 1], got %s", string(m["loss"]))
		}
		key := PairKey(uint8(src), uint8(dst))
		if seen[key] {
			return nil, ferr(f, "duplicate pair src=%d dst=%d", src, dst)
		}
		seen[key] = true
		t.Pairs = append(t.Pairs, PairParams{
			Src: int(src), Dst: int(dst), Queue: uint16(q),
			DelayNs: delay * 1000, JitterNs: jitter * 1000, Loss: loss,
		})
	}
	for i := range t.Pairs {
		p := &t.Pairs[i]
		t.byKey[PairKey(uint8(p.Src), uint8(p.Dst))] = p
	}
	return t, nil
}
