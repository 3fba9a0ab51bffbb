package main

import "testing"

func ipv4(src, dst [4]byte) []byte {
	p := make([]byte, 20)
	p[0] = 0x45
	copy(p[12:], src[:])
	copy(p[16:], dst[:])
	return p
}

func TestSitesOf(t *testing.T) {
	p := ipv4([4]byte{10, 210, 1, 2}, [4]byte{10, 210, 7, 2})
	s, d, ok := SitesOf(p, 2)
	if !ok || s != 1 || d != 7 {
		t.Fatalf("octet 2: %d %d %v", s, d, ok)
	}
	s, d, ok = SitesOf(p, 3)
	if !ok || s != 2 || d != 2 {
		t.Fatalf("octet 3: %d %d %v", s, d, ok)
	}
	s, d, ok = SitesOf(p, 0)
	if !ok || s != 10 || d != 10 {
		t.Fatalf("octet 0: %d %d %v", s, d, ok)
	}
}

func TestSitesOfRejectsNonIPv4(t *testing.T) {
	p := ipv4([4]byte{10, 210, 1, 2}, [4]byte{10, 210, 7, 2})
	p6 := append([]byte{}, p...)
	p6[0] = 0x60
	for name, pkt := range map[string][]byte{"ipv6": p6, "short": p[:19], "empty": nil} {
		if _, _, ok := SitesOf(pkt, 2); ok {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, _, ok := SitesOf(p, 4); ok {
		t.Error("octet 4 accepted")
	}
}
