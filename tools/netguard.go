package tools

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"syscall"
	"time"
)

// Address ranges the network guard refuses besides the ones netip
// classifies itself (loopback, private, link-local, multicast,
// unspecified).
var (
	cgnatPrefix     = netip.MustParsePrefix("100.64.0.0/10")
	thisNetPrefix   = netip.MustParsePrefix("0.0.0.0/8")   // Linux connects 0.x.x.x to the local host
	reservedPrefix  = netip.MustParsePrefix("240.0.0.0/4") // reserved and broadcast
	siteLocalPrefix = netip.MustParsePrefix("fec0::/10")   // deprecated IPv6 private range
	nat64Prefix     = netip.MustParsePrefix("64:ff9b::/96")
)

// blockedError is a connection the network guard refused.
type blockedError struct {
	addr   netip.Addr
	reason string // the address class, e.g. "loopback"
	raw    string // the address as the dialer gave it, when it did not parse
}

func (e *blockedError) Error() string {
	if !e.addr.IsValid() {
		return fmt.Sprintf("cannot check the address %q; loopback/private addresses are not allowed", e.raw)
	}
	if strings.HasPrefix(e.reason, "this host") {
		return fmt.Sprintf("%s is an address of %s; loopback/private addresses are not allowed", e.addr, e.reason)
	}
	article := "a"
	if strings.ContainsRune("aeiouAEIOU", rune(e.reason[0])) {
		article = "an"
	}
	return fmt.Sprintf("%s is %s %s address; loopback/private addresses are not allowed", e.addr, article, e.reason)
}

// addressClass says why addr must not be reached, or "" when it may.
func addressClass(addr netip.Addr) string {
	// ::ffff:127.0.0.1 reaches 127.0.0.1, so judge the IPv4 address.
	addr = addr.Unmap()
	// 64:ff9b::a.b.c.d reaches a.b.c.d through a NAT64 gateway, which may
	// well sit inside the private network; judge the embedded address.
	if nat64Prefix.Contains(addr) {
		b := addr.As16()
		if class := addressClass(netip.AddrFrom4([4]byte(b[12:]))); class != "" {
			return class + " (through NAT64)"
		}
	}
	switch {
	case !addr.IsValid():
		return "invalid"
	case addr.IsLoopback():
		return "loopback"
	case addr.IsPrivate(), siteLocalPrefix.Contains(addr):
		return "private"
	case addr.IsLinkLocalUnicast(), addr.IsLinkLocalMulticast():
		return "link-local"
	case cgnatPrefix.Contains(addr):
		return "CGNAT"
	case addr.IsUnspecified(), thisNetPrefix.Contains(addr):
		return "unspecified"
	case addr.IsMulticast(), addr.IsInterfaceLocalMulticast():
		return "multicast"
	case reservedPrefix.Contains(addr):
		return "reserved"
	}
	return ""
}

// guardAddress is the network guard: an error for every address outside
// the public internet, and for every address of this host itself.
func guardAddress(ap netip.AddrPort) error {
	return hostGuard(interfaceAddrs)(ap)
}

// hostGuard is the network guard with the host's own addresses listed by
// hostAddrs. A host's own public address (an interface address that is
// not private, such as a cloud VM's public IP or a TEST-NET address on a
// container's interface) would otherwise pass addressClass, and a
// connection to it reaches this host's listeners (the API, the metrics
// port, Temporal) as surely as 127.0.0.1 does.
func hostGuard(hostAddrs func() ([]netip.Addr, error)) func(netip.AddrPort) error {
	return func(ap netip.AddrPort) error {
		addr := ap.Addr().WithZone("")
		if class := addressClass(addr); class != "" {
			return &blockedError{addr: addr, reason: class}
		}
		own, err := hostAddrs()
		if err != nil {
			// Fail closed: without the host's addresses the guard cannot
			// tell whether addr is one of them.
			return &blockedError{addr: addr, reason: "this host, perhaps (its interfaces could not be listed)"}
		}
		for _, a := range own {
			if a.WithZone("").Unmap() == addr.Unmap() {
				return &blockedError{addr: addr, reason: "this host"}
			}
		}
		return nil
	}
}

// interfaceAddrs lists the addresses of this host's network interfaces.
// They are listed on every check, not once: interfaces come and go
// (DHCP, VPNs, container networks), and http_get connects rarely enough
// for one netlink request per connection not to matter.
func interfaceAddrs() ([]netip.Addr, error) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil, err
	}
	out := make([]netip.Addr, 0, len(addrs))
	for _, a := range addrs {
		var ip net.IP
		switch v := a.(type) {
		case *net.IPNet:
			ip = v.IP
		case *net.IPAddr:
			ip = v.IP
		}
		if addr, ok := netip.AddrFromSlice(ip); ok {
			out = append(out, addr.Unmap())
		}
	}
	return out, nil
}

// dialControl runs guard on the address a socket is about to connect to.
// It runs after name resolution, on every address the dialer tries, and on
// every connection including those of redirects, so neither a hostname
// that resolves to a private address (DNS rebinding, "localhost",
// 127.0.0.1.nip.io) nor a redirect can get past it.
func dialControl(guard func(netip.AddrPort) error) func(ctx context.Context, network, address string, c syscall.RawConn) error {
	return func(_ context.Context, _, address string, _ syscall.RawConn) error {
		ap, err := netip.ParseAddrPort(address)
		if err != nil { // fail closed: never connect where we cannot judge
			return &blockedError{raw: address}
		}
		return guard(ap)
	}
}

// GuardedDialer returns a dialer that applies the network guard http_get
// uses (no loopback, private, link-local, CGNAT, multicast or reserved
// address, and none of this host's own addresses) to every address it
// connects to, after name resolution; allowPrivate switches the guard
// off. Other packages that reach URLs a tenant or a model chose (MCP
// servers) share it so that one rule, tested once, decides what the
// worker's network exposes.
func GuardedDialer(allowPrivate bool, timeout time.Duration) *net.Dialer {
	d := &net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second}
	if !allowPrivate {
		d.ControlContext = dialControl(guardAddress)
	}
	return d
}

// IsBlocked reports whether err, or an error it wraps, is a connection
// the network guard refused. Such a failure is policy, not a transient
// fault: retrying it cannot succeed.
func IsBlocked(err error) bool {
	var b *blockedError
	return errors.As(err, &b)
}
