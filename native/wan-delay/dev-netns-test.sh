#!/usr/bin/env bash
# Manual test of juice-wan-delay in throw-away network namespaces.
#
#   sudo ./dev-netns-test.sh [BINARY] [accuracy|precise|throughput|functional|all]
#
# Creates juice-dev-core + juice-dev-s1/s2 (10.210.k.0/24, core = .1, site = .2),
# sends pair 1->2 to NFQUEUE 0 and 2->1 to NFQUEUE 1, runs ping accuracy runs
# at 5/50/150 ms one-way and a UDP flood at 50 ms one-way, prints figures and
# removes everything on exit. Traffic stays inside these namespaces.
#
# Env: OFFSET_US (table offset_us, default: daemon default), PINGS (per delay,
# default 100), PPS_LIST (UDP rates, default "20000 40000 60000"),
# FLOOD_SECS (default 5), PKT_LEN (UDP payload bytes, default 64),
# DELAYS_MS (default "0 5 50 150"), MAX_DEPTH (daemon --max-depth).
# Modes: accuracy (ping), precise (rttprobe.py, µs resolution), throughput,
# functional (jitter order, loss, bad reload, shared queue, TCP, SIGTERM), all.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
BIN=${1:-/var/cache/juice/bin/juice-wan-delay}
MODE=${2:-all}
PINGS=${PINGS:-100}
PPS_LIST=${PPS_LIST:-"20000 40000 60000"}
FLOOD_SECS=${FLOOD_SECS:-5}
PKT_LEN=${PKT_LEN:-64}
P=juice-dev-
CORE=${P}core
WORK=$(mktemp -d /tmp/juice-dev-wan.XXXXXX)
DPID=

cleanup() {
    set +e
    if [ -n "$DPID" ] && kill -0 "$DPID" 2>/dev/null; then
        kill -TERM "$DPID"; wait "$DPID" 2>/dev/null
    fi
    for ns in ${CORE} ${P}s1 ${P}s2; do
        ip netns pids "$ns" 2>/dev/null | xargs -r kill 2>/dev/null
        ip netns del "$ns" 2>/dev/null
    done
    rm -rf "$WORK"
}
trap cleanup EXIT

[ -x "$BIN" ] || { echo "binary $BIN not found (run native/build.sh)" >&2; exit 1; }

ip netns add "$CORE"
ip -n "$CORE" link set lo up
ip netns exec "$CORE" sysctl -qw net.ipv4.ip_forward=1
for k in 1 2; do
    ns=${P}s$k
    ip netns add "$ns"
    ip -n "$ns" link set lo up
    ip link add "jdc$k" netns "$CORE" type veth peer name eth0 netns "$ns"
    ip -n "$CORE" addr add "10.210.$k.1/24" dev "jdc$k"
    ip -n "$CORE" link set "jdc$k" up
    ip -n "$ns" addr add "10.210.$k.2/24" dev eth0
    ip -n "$ns" link set eth0 up
    ip -n "$ns" route add default via "10.210.$k.1"
    ip netns exec "$ns" sysctl -qw net.ipv4.tcp_rmem="4096 131072 33554432"
    ip netns exec "$ns" sysctl -qw net.ipv4.tcp_wmem="4096 131072 33554432"
    ip netns exec "$ns" sysctl -qw net.core.rmem_max=33554432 2>/dev/null || true
done
ip netns exec "$CORE" iptables -A FORWARD -s 10.210.1.0/24 -d 10.210.2.0/24 -j NFQUEUE --queue-num 0
ip netns exec "$CORE" iptables -A FORWARD -s 10.210.2.0/24 -d 10.210.1.0/24 -j NFQUEUE --queue-num 1

write_table() { # delay_us [jitter_us] [loss]
    local off=""
    [ -n "${OFFSET_US:-}" ] && off="\"offset_us\": $OFFSET_US,"
    cat > "$WORK/table.tmp" <<EOF
{"version": 1, "site_octet": 2, $off
 "pairs": [{"src": 1, "dst": 2, "queue": 0, "delay_us": $1, "jitter_us": ${2:-0}, "loss": ${3:-0}},
           {"src": 2, "dst": 1, "queue": 1, "delay_us": $1, "jitter_us": ${2:-0}, "loss": ${3:-0}}]}
EOF
    mv "$WORK/table.tmp" "$WORK/table.json"
}

start_daemon() {
    write_table "$1"
    ip netns exec "$CORE" "$BIN" --table "$WORK/table.json" --stats "$WORK/stats.json" \
        --pidfile "$WORK/pid" --max-depth "${MAX_DEPTH:-100000}" 2>>"$WORK/daemon.log" &
    DPID=$!
    for _ in $(seq 100); do [ -s "$WORK/pid" ] && break; sleep 0.05; done
    [ -s "$WORK/pid" ] || { cat "$WORK/daemon.log"; echo "daemon did not start" >&2; exit 1; }
}

reload() { write_table "$@"; kill -HUP "$DPID"; sleep 0.3; }

cpu_ticks() { awk '{print $14+$15}' "/proc/$DPID/stat"; }

accuracy() {
    printf '%-8s %-8s %-8s %-8s %-8s %-8s %-8s\n' one-way target median mean min max mdev
    for d in ${DELAYS_MS:-0 5 50 150}; do
        reload $((d * 1000))
        ip netns exec ${P}s1 ping -c 3 -i 0.2 -q 10.210.2.2 >/dev/null
        ip netns exec ${P}s1 ping -c "$PINGS" -i 0.02 10.210.2.2 > "$WORK/ping.txt"
        grep -o 'time=[0-9.]*' "$WORK/ping.txt" | cut -d= -f2 | sort -n > "$WORK/rtt.txt"
        n=$(wc -l < "$WORK/rtt.txt")
        med=$(sed -n "$(( (n + 1) / 2 ))p" "$WORK/rtt.txt")
        summ=$(sed -n 's/^rtt .* = //p' "$WORK/ping.txt" | cut -d' ' -f1)
        IFS=/ read -r mn avg mx mdev <<< "$summ"
        printf '%-8s %-8s %-8s %-8s %-8s %-8s %-8s\n' "${d}ms" "$((2 * d))" "$med" "$avg" "$mn" "$mx" "$mdev"
    done
}

throughput() {
    reload 50000
    for pps in $PPS_LIST; do
        # One-off server (-1): exits after this test; its pid is kept to stop it.
        rm -f "$WORK/iperf-s.pid"
        ip netns exec ${P}s2 iperf3 -s -D -1 -p 5201 -I "$WORK/iperf-s.pid" --logfile "$WORK/iperf-s.log"
        sleep 0.3
        bw=$((pps * PKT_LEN * 8))
        t0=$(cpu_ticks)
        ( sleep 1; ip netns exec ${P}s1 ping -c 100 -i 0.02 -q 10.210.2.2 | tail -1 | sed 's/^/  ping during flood: /' ) &
        pingpid=$!
        ip netns exec ${P}s1 iperf3 -c 10.210.2.2 -u -l "$PKT_LEN" -b "$bw" -t "$FLOOD_SECS" --json \
            > "$WORK/iperf.json" || true
        t1=$(cpu_ticks)
        wait "$pingpid" || true
        sleep 0.5
        spid=$(cat "$WORK/iperf-s.pid" 2>/dev/null || true)
        if [ -n "$spid" ] && kill -0 "$spid" 2>/dev/null; then kill "$spid"; fi
        python3 - "$WORK/iperf.json" "$WORK/stats.json" "$pps" "$t0" "$t1" "$FLOOD_SECS" <<'EOF'
import json, sys, os
it = json.load(open(sys.argv[1]))
st = json.load(open(sys.argv[2]))
s = it.get("end", {}).get("sum", {})
q = st["queues"].get("0", {})
hz = os.sysconf("SC_CLK_TCK")
cpu = (int(sys.argv[5]) - int(sys.argv[4])) / hz / float(sys.argv[6]) * 100
print(f"target {sys.argv[3]} pps: sent {s.get('packets', 0) / float(sys.argv[6]):.0f} pps, "
      f"lost {s.get('lost_packets')} ({s.get('lost_percent', 0):.3f}%), "
      f"daemon q0 recv {q.get('received')} ovf {q.get('dropped_overflow')} kern {q.get('dropped_kernel')} "
      f"max_depth {q.get('max_depth')} late_p99 {q.get('late_us_p99')}us, daemon CPU {cpu:.0f}%")
EOF
    done
}

functional() {
    echo "== jitter 50ms +- 10ms (no reordering: ping seq must stay in order)"
    reload 50000 10000
    ip netns exec ${P}s1 ping -c 100 -i 0.01 10.210.2.2 > "$WORK/jit.txt"
    tail -1 "$WORK/jit.txt"
    grep -o 'icmp_seq=[0-9]*' "$WORK/jit.txt" | cut -d= -f2 | sort -nc && echo "replies in order"
    echo "== loss 0.2 each way (expect ~36% ping loss)"
    reload 1000 0 0.2
    ip netns exec ${P}s1 ping -c 300 -i 0.005 -q 10.210.2.2 | grep -o '[0-9.]*% packet loss' || true
    echo "== bad table on SIGHUP is rejected, old one kept"
    echo '{"version": 1, "pairs": [{"src": 1}]}' > "$WORK/table.json"; kill -HUP "$DPID"; sleep 0.3
    tail -1 "$WORK/daemon.log"
    ip netns exec ${P}s1 ping -c 3 -i 0.2 -q 10.210.2.2 | tail -1
    echo "== both directions on ONE queue with different delays (single-verdict path): expect RTT 60"
    echo '{"version": 1, "pairs": [{"src": 1, "dst": 2, "queue": 0, "delay_us": 50000},
        {"src": 2, "dst": 1, "queue": 0, "delay_us": 10000}]}' > "$WORK/table.tmp"
    mv "$WORK/table.tmp" "$WORK/table.json"
    ip netns exec "$CORE" iptables -I FORWARD 1 -s 10.210.2.0/24 -d 10.210.1.0/24 -j NFQUEUE --queue-num 0
    kill -HUP "$DPID"; sleep 0.3
    ip netns exec ${P}s1 ping -c 50 -i 0.01 -q 10.210.2.2 | tail -1
    ip netns exec ${P}s2 iperf3 -s -D -1 -p 5202 --logfile "$WORK/iperf-s2.log"; sleep 0.3
    ip netns exec ${P}s1 iperf3 -c 10.210.2.2 -p 5202 -u -l 64 -b 15M -t 3 --json > "$WORK/mix.json" || true
    python3 -c "import json,sys; s=json.load(open(sys.argv[1]))['end']['sum']; print('mixed-queue UDP flood: lost', s['lost_packets'], 'of', s['packets'])" "$WORK/mix.json"
    ip netns exec "$CORE" iptables -D FORWARD 1
    echo "== TCP bulk at 25 ms one-way (GSO path)"
    reload 25000
    ip netns exec ${P}s2 iperf3 -s -D -1 -p 5203 --logfile "$WORK/iperf-s3.log"; sleep 0.3
    ip netns exec ${P}s1 iperf3 -c 10.210.2.2 -p 5203 -t 5 | grep -E 'sender|receiver'
    echo "== SIGTERM with packets in flight at 150 ms: pings sent just before must still be answered"
    reload 150000
    ip netns exec ${P}s1 ping -c 5 -i 0.05 10.210.2.2 > "$WORK/term.txt" &
    pp=$!
    sleep 0.27
    kill -TERM "$DPID"; wait "$DPID" && echo "daemon exit code 0"; DPID=
    wait $pp || true
    grep -o '[0-9]* received' "$WORK/term.txt"
    start_daemon 5000
}

precise() {
    for d in ${DELAYS_MS:-0 5 50 150}; do
        reload $((d * 1000))
        ip netns exec ${P}s1 ping -c 2 -i 0.2 -q 10.210.2.2 >/dev/null
        printf '%-6s target %-5s ' "${d}ms" "$((2 * d))"
        ip netns exec ${P}s1 python3 "$HERE/rttprobe.py" 10.210.2.2 "$PINGS" 0.013
        sleep 1.1
        python3 -c "import json,sys; q=json.load(open(sys.argv[1]))['queues']; print('   daemon lateness p50/p99 us:', *[(k, v['late_us_p50'], v['late_us_p99']) for k, v in q.items()])" "$WORK/stats.json"
    done
}

start_daemon 5000
echo "baseline (daemon bound, idle CPU check over 2 s):"
t0=$(cpu_ticks); sleep 2; t1=$(cpu_ticks); echo "  idle CPU ticks: $((t1 - t0))"
case $MODE in
    accuracy) accuracy ;;
    throughput) throughput ;;
    functional) functional ;;
    precise) precise ;;
    all) accuracy; precise; throughput; functional ;;
esac
kill -TERM "$DPID"; wait "$DPID"; rc=$?; DPID=
echo "daemon exit code $rc; final stats:"
cat "$WORK/stats.json"
[ ! -e "$WORK/pid" ] && echo "pidfile removed"
