package main

// Minimal NFQUEUE netlink binding (nfnetlink_queue), written directly on
// golang.org/x/sys/unix so that the hot path is one read(2) per packet with no
// allocation, and verdicts are packed several per sendto(2).

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"golang.org/x/sys/unix"
)

const (
	nfnlSubsysQueue = 3

	nfqnlMsgPacket       = 0
	nfqnlMsgVerdict      = 1
	nfqnlMsgConfig       = 2
	nfqnlMsgVerdictBatch = 3

	nfqaPacketHdr  = 1
	nfqaVerdictHdr = 2
	nfqaPayload    = 10

	nfqaCfgCmd         = 1
	nfqaCfgParams      = 2
	nfqaCfgQueueMaxlen = 3
	nfqaCfgMask        = 4
	nfqaCfgFlags       = 5

	nfqnlCfgCmdBind = 1

	nfqnlCopyPacket = 2
	nfqaCfgFGSO     = 1 << 2

	nfDrop   = 0
	nfAccept = 1

	nlaTypeMask = 0x3fff

	// copyRange: bytes of each packet copied to user space (IPv4 header).
	copyRange = 64
	// verdictMsgLen: nlmsghdr(16) + nfgenmsg(4) + nlattr(4) + verdict hdr(8).
	verdictMsgLen = 32
)

// NfqConfig holds the tunables of a queue binding.
type NfqConfig struct {
	Queue       uint16
	MaxQueueLen uint32 // kernel-side queue length limit
	RcvBuf      int    // netlink socket receive buffer (bytes)
	GSO         bool   // ask the kernel to queue GSO packets unsegmented
}

// Nfq is one bound queue.
type Nfq struct {
	fd    int
	queue uint16
	seq   uint32
	vbuf  []byte // pending verdict messages
}

func nlmsg(b []byte, typ uint16, flags uint16, seq uint32, family uint8, resID uint16) []byte {
	start := len(b)
	b = append(b, make([]byte, 20)...)
	h := b[start:]
	binary.LittleEndian.PutUint16(h[4:], typ)
	binary.LittleEndian.PutUint16(h[6:], flags)
	binary.LittleEndian.PutUint32(h[8:], seq)
	h[16] = family
	h[17] = 0 // NFNETLINK_V0
	binary.BigEndian.PutUint16(h[18:], resID)
	return b
}

func nlattr(b []byte, typ uint16, data []byte) []byte {
	l := 4 + len(data)
	var hdr [4]byte
	binary.LittleEndian.PutUint16(hdr[0:], uint16(l))
	binary.LittleEndian.PutUint16(hdr[2:], typ)
	b = append(b, hdr[:]...)
	b = append(b, data...)
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	return b
}

func nlfinish(b []byte, start int) {
	binary.LittleEndian.PutUint32(b[start:], uint32(len(b)-start))
}

// AppendVerdict appends one verdict message for queue q to b.
func AppendVerdict(b []byte, q uint16, v Verdict) []byte {
	typ := uint16(nfnlSubsysQueue<<8 | nfqnlMsgVerdict)
	if v.Batch {
		typ = nfnlSubsysQueue<<8 | nfqnlMsgVerdictBatch
	}
	start := len(b)
	b = nlmsg(b, typ, unix.NLM_F_REQUEST, 0, unix.AF_UNSPEC, q)
	var vh [8]byte
	code := uint32(nfDrop)
	if v.Accept {
		code = nfAccept
	}
	binary.BigEndian.PutUint32(vh[0:], code)
	binary.BigEndian.PutUint32(vh[4:], v.ID)
	b = nlattr(b, nfqaVerdictHdr, vh[:])
	nlfinish(b, start)
	return b
}

// PacketMsg is the part of an NFQNL_MSG_PACKET we use.
type PacketMsg struct {
	ID      uint32
	Payload []byte
}

// ParseMessages walks a buffer of netlink messages. For each packet message
// it calls onPacket; for each NLMSG_ERROR with a non-zero code it calls
// onError (may be nil).
func ParseMessages(buf []byte, onPacket func(PacketMsg), onError func(errno int32)) {
	for len(buf) >= 16 {
		l := int(binary.LittleEndian.Uint32(buf[0:]))
		typ := binary.LittleEndian.Uint16(buf[4:])
		if l < 16 || l > len(buf) {
			return
		}
		msg := buf[:l]
		switch {
		case typ == unix.NLMSG_ERROR:
			if l >= 20 && onError != nil {
				if code := int32(binary.LittleEndian.Uint32(msg[16:])); code != 0 {
					onError(code)
				}
			}
		case typ == nfnlSubsysQueue<<8|nfqnlMsgPacket && l >= 20:
			var pm PacketMsg
			haveID := false
			attrs := msg[20:]
			for len(attrs) >= 4 {
				al := int(binary.LittleEndian.Uint16(attrs[0:]))
				at := binary.LittleEndian.Uint16(attrs[2:]) & nlaTypeMask
				if al < 4 || al > len(attrs) {
					break
				}
				data := attrs[4:al]
				switch at {
				case nfqaPacketHdr:
					if len(data) >= 4 {
						pm.ID = binary.BigEndian.Uint32(data)
						haveID = true
					}
				case nfqaPayload:
					pm.Payload = data
				}
				adv := (al + 3) &^ 3
				if adv > len(attrs) {
					break
				}
				attrs = attrs[adv:]
			}
			if haveID {
				onPacket(pm)
			}
		}
		adv := (l + 3) &^ 3
		if adv > len(buf) {
			return
		}
		buf = buf[adv:]
	}
}

// OpenNfq creates a netlink socket and binds it to a queue.
func OpenNfq(cfg NfqConfig) (*Nfq, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, unix.NETLINK_NETFILTER)
	if err != nil {
		return nil, fmt.Errorf("netlink socket: %w", err)
	}
	n := &Nfq{fd: fd, queue: cfg.Queue, vbuf: make([]byte, 0, 64*1024)}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("netlink bind: %w", err)
	}
	if cfg.RcvBuf > 0 {
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, cfg.RcvBuf); err != nil {
			_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, cfg.RcvBuf)
		}
	}
	_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, 4<<20)

	q := cfg.Queue
	if err := n.config(q, nfqaCfgCmd, []byte{nfqnlCfgCmdBind, 0, 0, unix.AF_INET}); err != nil {
		n.Close()
		if errors.Is(err, unix.EPERM) || errors.Is(err, unix.EBUSY) {
			return nil, fmt.Errorf("bind queue %d: %w (is another process bound to it?)", q, err)
		}
		return nil, fmt.Errorf("bind queue %d: %w", q, err)
	}
	params := make([]byte, 5)
	binary.BigEndian.PutUint32(params, copyRange)
	params[4] = nfqnlCopyPacket
	if err := n.config(q, nfqaCfgParams, params); err != nil {
		n.Close()
		return nil, fmt.Errorf("queue %d copy mode: %w", q, err)
	}
	if cfg.MaxQueueLen > 0 {
		ml := make([]byte, 4)
		binary.BigEndian.PutUint32(ml, cfg.MaxQueueLen)
		if err := n.config(q, nfqaCfgQueueMaxlen, ml); err != nil {
			n.Close()
			return nil, fmt.Errorf("queue %d maxlen: %w", q, err)
		}
	}
	if cfg.GSO {
		fl := make([]byte, 4)
		binary.BigEndian.PutUint32(fl, nfqaCfgFGSO)
		// Flags and mask must travel in one message; ignore lack of support.
		_ = n.configAttrs(q, [][2]any{{uint16(nfqaCfgFlags), fl}, {uint16(nfqaCfgMask), fl}})
	}
	return n, nil
}

func (n *Nfq) config(q uint16, attr uint16, data []byte) error {
	return n.configAttrs(q, [][2]any{{attr, data}})
}

// configAttrs sends one NFQNL_MSG_CONFIG with ACK and waits for the answer.
// Only used before the event loop starts reading the socket.
func (n *Nfq) configAttrs(q uint16, attrs [][2]any) error {
	n.seq++
	b := nlmsg(nil, nfnlSubsysQueue<<8|nfqnlMsgConfig, unix.NLM_F_REQUEST|unix.NLM_F_ACK, n.seq, unix.AF_UNSPEC, q)
	for _, a := range attrs {
		b = nlattr(b, a[0].(uint16), a[1].([]byte))
	}
	nlfinish(b, 0)
	if err := unix.Sendto(n.fd, b, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return err
	}
	buf := make([]byte, 8192)
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		fds := []unix.PollFd{{Fd: int32(n.fd), Events: unix.POLLIN}}
		ts := unix.NsecToTimespec(int64(100 * time.Millisecond))
		if _, err := unix.Ppoll(fds, &ts, nil); err != nil && err != unix.EINTR {
			return err
		}
		r, err := unix.Read(n.fd, buf)
		if err == unix.EAGAIN || err == unix.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		p := buf[:r]
		for len(p) >= 16 {
			l := int(binary.LittleEndian.Uint32(p[0:]))
			if l < 16 || l > len(p) {
				break
			}
			typ := binary.LittleEndian.Uint16(p[4:])
			seq := binary.LittleEndian.Uint32(p[8:])
			if typ == unix.NLMSG_ERROR && seq == n.seq && l >= 20 {
				code := int32(binary.LittleEndian.Uint32(p[16:]))
				if code == 0 {
					return nil
				}
				return unix.Errno(-code)
			}
			p = p[(l+3)&^3:]
		}
	}
	return fmt.Errorf("timeout waiting for netlink ack")
}

// QueueVerdict adds a verdict to the pending buffer (flushed by Flush).
func (n *Nfq) QueueVerdict(v Verdict) error {
	if len(n.vbuf)+verdictMsgLen > cap(n.vbuf) {
		if err := n.Flush(); err != nil {
			return err
		}
	}
	n.vbuf = AppendVerdict(n.vbuf, n.queue, v)
	return nil
}

// Flush sends all pending verdicts in one datagram; the kernel processes the
// messages in order.
func (n *Nfq) Flush() error {
	if len(n.vbuf) == 0 {
		return nil
	}
	var err error
	for {
		err = unix.Sendto(n.fd, n.vbuf, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK})
		if err != unix.EINTR && err != unix.EAGAIN {
			break
		}
		if err == unix.EAGAIN {
			time.Sleep(50 * time.Microsecond)
		}
	}
	n.vbuf = n.vbuf[:0]
	return err
}

// Fd returns the socket descriptor (for polling).
func (n *Nfq) Fd() int { return n.fd }

// Close closes the socket; the kernel then unbinds the queue (dropping any
// packet still queued in it).
func (n *Nfq) Close() error {
	if n.fd < 0 {
		return nil
	}
	err := unix.Close(n.fd)
	n.fd = -1
	return err
}
