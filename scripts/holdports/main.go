// Command holdports runs a command while the local ports simlock uses by
// default, and the ones its tests once took for granted, are held by
// another program: it proves the suite takes its ports from the OS.
//
//	go run ./scripts/holdports -- go test ./...
//
// It listens on 127.0.0.1 at each port (accepting and closing every
// connection, as a stranger's server would), runs the command, and exits
// with its exit code. A port it cannot take is already held by someone
// else, which serves the same purpose: it says so and goes on.
package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
)

// ports are the defaults a test could take for granted: the HTTP API's
// (http.port), the private adb server's (drivers.android.adbServerPort),
// the user's own adb server's, and the first emulator console port of
// simlock's range with its adb port.
var ports = []int{4700, 5037, 5038, 5586, 5587}

func main() {
	args := os.Args[1:]
	if len(args) > 0 && args[0] == "--" {
		args = args[1:]
	}
	if len(args) == 0 {
		fmt.Fprintln(os.Stderr, "usage: holdports -- <command> [args...]")
		os.Exit(2)
	}
	for _, p := range ports {
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			fmt.Fprintf(os.Stderr, "holdports: 127.0.0.1:%d is already held (%v)\n", p, err)
			continue
		}
		go serve(l)
	}
	fmt.Fprintf(os.Stderr, "holdports: holding 127.0.0.1 ports %v while running %v\n", ports, args)
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		os.Exit(ee.ExitCode())
	case err != nil:
		fmt.Fprintf(os.Stderr, "holdports: %v\n", err)
		os.Exit(1)
	}
}

func serve(l net.Listener) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		c.Close()
	}
}
