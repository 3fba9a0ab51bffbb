package main

// IPv4 site extraction.

// SitesOf returns the source and destination site numbers of an IPv4 packet:
// byte `octet` (0-based) of the source and destination address. ok is false
// for anything that is not a complete IPv4 header.
func SitesOf(pkt []byte, octet int) (src, dst uint8, ok bool) {
	if len(pkt) < 20 || pkt[0]>>4 != 4 || octet < 0 || octet > 3 {
		return 0, 0, false
	}
	return pkt[12+octet], pkt[16+octet], true
}
