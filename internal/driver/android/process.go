package android

import (
	"context"
	"net"
	"os"
	"strconv"
	"syscall"
	"time"

	"github.com/simlock/simlock/internal/runner"
)

// child is a long-lived program this driver started: the adb server or an
// emulator. Once watched, a goroutine waits on it, so it is reaped as soon as
// it exits and done tells everyone.
type child struct {
	proc runner.Process
	done chan struct{} // closed once the program has exited
	// port is the emulator's console port, or the adb server's port.
	port int
	log  string
}

func newChild(p runner.Process, port int, log string) *child {
	return &child{proc: p, done: make(chan struct{}), port: port, log: log}
}

// watch waits for the program in the background, runs exited (if any) and
// then closes done.
func (p *child) watch(exited func()) {
	go func() {
		_ = p.proc.Wait()
		if exited != nil {
			exited()
		}
		close(p.done)
	}()
}

func (p *child) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop signals the program's process group with sig, then SIGKILL if it has
// not exited after grace, and waits for it to exit. A program that already
// exited is not signalled: its pid may belong to someone else by now.
func (p *child) stop(sig syscall.Signal, grace time.Duration) {
	if p.exited() {
		return
	}
	_ = p.proc.Signal(sig)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-p.done:
		return
	case <-t.C:
	}
	_ = p.proc.Signal(syscall.SIGKILL)
	<-p.done
}

// listening reports whether something accepts TCP connections on
// 127.0.0.1:port, where adb servers and emulator consoles listen.
func listening(ctx context.Context, port int) bool {
	dl := net.Dialer{Timeout: 500 * time.Millisecond}
	c, err := dl.DialContext(ctx, "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// pause waits d, or less if ctx ends; it reports whether ctx is still live.
func pause(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// tail returns the last n bytes of the file at path, for error messages.
func tail(path string, n int64) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return ""
	}
	off := max(fi.Size()-n, 0)
	b := make([]byte, fi.Size()-off)
	m, _ := f.ReadAt(b, off)
	return string(b[:m])
}
