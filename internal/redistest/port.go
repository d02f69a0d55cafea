package redistest

import (
	"fmt"
	"net"
	"strconv"
)

// freePort asks the kernel for an unused loopback TCP port. The port is only
// free at the moment the listener closes: callers must be ready to retry when
// the server then fails with "Address already in use".
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("redistest: find free port: %w", err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		return 0, fmt.Errorf("redistest: close probe listener: %w", err)
	}
	_, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return 0, fmt.Errorf("redistest: parse probe address %q: %w", addr, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return 0, fmt.Errorf("redistest: parse probe port %q: %w", portStr, err)
	}
	return port, nil
}
