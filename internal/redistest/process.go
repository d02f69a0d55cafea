package redistest

import (
	"bufio"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// errAddrInUse marks a start that failed because the port was taken, which
// callers handle by retrying (on a new port, or later on the same one).
var errAddrInUse = errors.New("redistest: address already in use")

func isAddrInUse(err error) bool { return errors.Is(err, errAddrInUse) }

// process is one redis-server child. done is closed once Wait has reaped it,
// so nothing ever leaves a zombie behind.
type process struct {
	cmd  *exec.Cmd
	done chan struct{}
}

// kill resumes (a stopped process only dies once scheduled, and resuming
// first makes that explicit), SIGKILLs and reaps.
func (p *process) kill() {
	// Errors mean the process already exited; done tells us for sure.
	_ = p.cmd.Process.Signal(sigResume)
	_ = p.cmd.Process.Kill()
	<-p.done
}

// stop asks for a graceful shutdown, falling back to kill.
func (p *process) stop() {
	_ = p.cmd.Process.Signal(sigResume)
	if err := p.cmd.Process.Signal(sigTerminate); err == nil {
		timer := time.NewTimer(stopTimeout)
		defer timer.Stop()
		select {
		case <-p.done:
			return
		case <-timer.C:
		}
	}
	p.kill()
}

// launch starts redis-server on the given ports and waits until it answers
// PING. On failure the process is reaped and the error carries the tail of
// this attempt's log; it wraps errAddrInUse when the port was taken.
func (s *Server) launch(port, clusterPort int) (*process, error) {
	logFile, err := os.OpenFile(s.logPath(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("redistest: open log: %w", err)
	}
	// Remember where this attempt's output starts so failures quote only it.
	logStart, err := logFile.Seek(0, io.SeekEnd)
	if err != nil {
		_ = logFile.Close()
		return nil, fmt.Errorf("redistest: seek log: %w", err)
	}
	cmd := exec.Command(s.bin, s.args(port, clusterPort)...)
	cmd.Dir = s.dir
	cmd.Stdout, cmd.Stderr = logFile, logFile // *os.File: no copying goroutine
	setDeathSignal(cmd)
	err = cmd.Start()
	// The child holds its own descriptor; ours is no longer needed.
	_ = logFile.Close()
	if err != nil {
		return nil, fmt.Errorf("redistest: start %s: %w", s.bin, err)
	}
	p := &process{cmd: cmd, done: make(chan struct{})}
	go func() {
		// The exit status is uninteresting: a killed server exits non-zero
		// by design, and startup failures are explained by the log.
		_ = cmd.Wait()
		close(p.done)
	}()

	addr := "127.0.0.1:" + strconv.Itoa(port)
	deadline := time.Now().Add(startTimeout)
	for {
		select {
		case <-p.done:
			tail := s.logTail(logStart)
			if strings.Contains(tail, "Address already in use") {
				return nil, fmt.Errorf("%w: port %d or %d: log:\n%s", errAddrInUse, port, clusterPort, tail)
			}
			hint := ""
			if s.cfg.tls {
				hint = " (WithTLS needs redis-server built with TLS support, BUILD_TLS=yes; Debian's is)"
			}
			return nil, fmt.Errorf("redistest: redis-server on %s exited during startup%s; log:\n%s", addr, hint, tail)
		default:
		}
		if ping(addr, s.tlsConf) {
			return p, nil
		}
		if time.Now().After(deadline) {
			p.kill()
			return nil, fmt.Errorf("redistest: redis-server on %s did not answer PING within %v; log:\n%s",
				addr, startTimeout, s.logTail(logStart))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// ping reports whether a server at addr accepts commands. A NOAUTH or NOPERM
// reply counts: the server is up, only the default user is restricted.
func ping(addr string, tlsConf *tls.Config) bool {
	const timeout = 500 * time.Millisecond
	conn, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return false
	}
	defer func() { _ = conn.Close() }()
	if err := conn.SetDeadline(time.Now().Add(timeout)); err != nil {
		return false
	}
	if tlsConf != nil {
		conn = tls.Client(conn, tlsConf)
	}
	if _, err := io.WriteString(conn, "PING\r\n"); err != nil {
		return false
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return false
	}
	return strings.HasPrefix(line, "+PONG") ||
		strings.HasPrefix(line, "-NOAUTH") ||
		strings.HasPrefix(line, "-NOPERM")
}

// logTail returns up to the last 4 KiB written to the log since offset.
func (s *Server) logTail(offset int64) string {
	const maxTail = 4 << 10
	data, err := os.ReadFile(s.logPath())
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", s.logPath(), err)
	}
	if offset > int64(len(data)) {
		offset = 0
	}
	data = data[offset:]
	if len(data) > maxTail {
		data = data[len(data)-maxTail:]
	}
	return string(data)
}
