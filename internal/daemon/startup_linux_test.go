//go:build linux

package daemon

import (
	"bytes"
	"context"
	"syscall"
	"testing"
	"unsafe"

	"github.com/simlock/simlock/internal/config"
	"github.com/simlock/simlock/internal/core"
)

// The order of the claim, as the kernel saw it: admin.token is in place
// before daemon.sock exists. (The dialing test above shows what a client
// sees; this one does not depend on catching a gap of microseconds.)
func TestAdminTokenIsInPlaceBeforeTheSocketExists(t *testing.T) {
	home := tempHome(t)
	fd, err := syscall.InotifyInit1(syscall.IN_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fd)
	if _, err := syscall.InotifyAddWatch(fd, home, syscall.IN_CREATE|syscall.IN_MOVED_TO); err != nil {
		t.Fatal(err)
	}
	d, err := Start(context.Background(), Options{Home: home, Version: "test", Config: config.Default(), Host: core.Host{CPUs: 8, RAMBytes: 64 << 30}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Stop("test over") })
	// Start has returned: the claim's events are queued already, so one
	// read returns them.
	buf := make([]byte, 64<<10)
	n, err := syscall.Read(fd, buf)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for off := 0; off+syscall.SizeofInotifyEvent <= n; {
		ev := (*syscall.InotifyEvent)(unsafe.Pointer(&buf[off]))
		name := buf[off+syscall.SizeofInotifyEvent : off+syscall.SizeofInotifyEvent+int(ev.Len)]
		names = append(names, string(bytes.TrimRight(name, "\x00")))
		off += syscall.SizeofInotifyEvent + int(ev.Len)
	}
	token, sock := -1, -1
	for i, name := range names {
		switch {
		case name == AdminTokenName && token < 0:
			token = i
		case name == SocketName && sock < 0:
			sock = i
		}
	}
	if token < 0 || sock < 0 || token > sock {
		t.Errorf("files appeared in the order %v; want %s before %s", names, AdminTokenName, SocketName)
	}
}
