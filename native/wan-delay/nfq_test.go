package main

import (
	"encoding/binary"
	"testing"
)

func TestAppendVerdictLayout(t *testing.T) {
	b := AppendVerdict(nil, 7, Verdict{ID: 0x01020304, Accept: true, Batch: true})
	b = AppendVerdict(b, 7, Verdict{ID: 9, Accept: false})
	if len(b) != 2*verdictMsgLen {
		t.Fatalf("len %d", len(b))
	}
	m := b[:verdictMsgLen]
	if binary.LittleEndian.Uint32(m) != verdictMsgLen {
		t.Fatal("nlmsg_len")
	}
	if binary.LittleEndian.Uint16(m[4:]) != 3<<8|3 {
		t.Fatal("batch type")
	}
	if binary.BigEndian.Uint16(m[18:]) != 7 {
		t.Fatal("res_id must be the queue, big endian")
	}
	if binary.LittleEndian.Uint16(m[20:]) != 12 || binary.LittleEndian.Uint16(m[22:]) != nfqaVerdictHdr {
		t.Fatal("verdict attr header")
	}
	if binary.BigEndian.Uint32(m[24:]) != nfAccept || binary.BigEndian.Uint32(m[28:]) != 0x01020304 {
		t.Fatal("verdict hdr")
	}
	m2 := b[verdictMsgLen:]
	if binary.LittleEndian.Uint16(m2[4:]) != 3<<8|1 || binary.BigEndian.Uint32(m2[24:]) != nfDrop {
		t.Fatal("single drop verdict")
	}
}

func packetMsg(id uint32, payload []byte) []byte {
	b := nlmsg(nil, nfnlSubsysQueue<<8|nfqnlMsgPacket, 0, 0, 2, 0)
	hdr := make([]byte, 7)
	binary.BigEndian.PutUint32(hdr, id)
	b = nlattr(b, nfqaPacketHdr, hdr)
	b = nlattr(b, 0x8000|11, []byte{1, 2, 3, 4}) // some nested attr to skip
	b = nlattr(b, nfqaPayload, payload)
	nlfinish(b, 0)
	return b
}

func TestParseMessages(t *testing.T) {
	p1 := ipv4([4]byte{10, 210, 1, 2}, [4]byte{10, 210, 2, 2})
	buf := packetMsg(42, p1)
	buf = append(buf, packetMsg(43, p1[:3])...)
	errMsg := make([]byte, 36)
	binary.LittleEndian.PutUint32(errMsg, 36)
	binary.LittleEndian.PutUint16(errMsg[4:], 2) // NLMSG_ERROR
	binary.LittleEndian.PutUint32(errMsg[16:], uint32(0xfffffffe))
	buf = append(buf, errMsg...)
	var got []PacketMsg
	var errs []int32
	ParseMessages(buf, func(p PacketMsg) { got = append(got, p) }, func(e int32) { errs = append(errs, e) })
	if len(got) != 2 || got[0].ID != 42 || got[1].ID != 43 {
		t.Fatalf("packets %+v", got)
	}
	if s, d, ok := SitesOf(got[0].Payload, 2); !ok || s != 1 || d != 2 {
		t.Fatal("payload not extracted")
	}
	if len(got[1].Payload) != 3 {
		t.Fatal("unpadded payload length")
	}
	if len(errs) != 1 || errs[0] != -2 {
		t.Fatalf("errors %v", errs)
	}
	// Truncated input must not panic.
	for i := 0; i < len(buf); i++ {
		ParseMessages(buf[:i], func(PacketMsg) {}, nil)
	}
}
