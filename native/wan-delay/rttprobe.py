"""ICMP echo RTT probe with kernel receive timestamps (like ping), printing
the median with µs resolution. Usage: rttprobe.py DST COUNT INTERVAL_S"""
import socket, struct, time, sys, statistics
dst, n, interval = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
s.settimeout(2)
SO_TIMESTAMPNS = 35
s.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
def csum(b):
    if len(b) % 2: b += b'\0'
    t = sum(struct.unpack('!%dH' % (len(b)//2), b)); t = (t >> 16) + (t & 0xffff); t += t >> 16
    return ~t & 0xffff
ident = 0x4a57; rtts = []
for seq in range(n):
    payload = b'x' * 56
    hdr = struct.pack('!BBHHH', 8, 0, 0, ident, seq)
    pkt = struct.pack('!BBHHH', 8, 0, csum(hdr + payload), ident, seq) + payload
    t0 = time.time_ns(); s.sendto(pkt, (dst, 0))
    while True:
        try: data, anc, _, _ = s.recvmsg(2048, 256)
        except socket.timeout: break
        t1 = time.time_ns()
        for lvl, typ_, val in anc:
            if lvl == socket.SOL_SOCKET and typ_ == SO_TIMESTAMPNS:
                sec, nsec = struct.unpack('qq', val[:16]); t1 = sec * 10**9 + nsec
        ihl = (data[0] & 15) * 4
        typ, _, _, i, sq = struct.unpack('!BBHHH', data[ihl:ihl+8])
        if typ == 0 and i == ident and sq == seq:
            rtts.append((t1 - t0) / 1e6); break
    time.sleep(interval)
rtts.sort()
print(f"n={len(rtts)} median={statistics.median(rtts):.3f} p10={rtts[len(rtts)//10]:.3f} p90={rtts[len(rtts)*9//10]:.3f} max={rtts[-1]:.3f}")
