// Command relay is a byte relay: the cheapest proxy there is, run by the proxy rows of the
// benchmark (benchmarks/proxy.py) as their floor.
//
//	relay LISTEN_ADDR UPSTREAM_ADDR
//
// Each accepted connection gets one connection of its own to UPSTREAM_ADDR and the bytes are copied
// both ways as they are, nothing parsed; an end of stream is passed on as a half close. io.Copy
// between two *net.TCPConn splices on Linux (TCPConn.ReadFrom): the bytes move from socket to
// socket inside the kernel and never through this process's memory. So what this relay costs the
// clients is what any proxy must cost on the machine (one more hop, one more process for the cores
// and the scheduler), and "relayed/direct" beside "proxied/direct" says how much of a proxy's cost is
// that floor and how much is its own work.
//
// It prints "listening" on stdout once bound, so that its starter waits for that line rather than
// for a guessed time.
package main

import (
	"fmt"
	"io"
	"log"
	"net"
	"os"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: relay LISTEN_ADDR UPSTREAM_ADDR")
		os.Exit(2)
	}
	ln, err := net.Listen("tcp", os.Args[1])
	if err != nil {
		log.Fatalf("relay: cannot listen on %s: %v", os.Args[1], err)
	}
	fmt.Println("listening") // os.Stdout is not buffered: the line is out now
	for {
		c, err := ln.Accept()
		if err != nil {
			log.Fatalf("relay: accept: %v", err)
		}
		go serve(c.(*net.TCPConn), os.Args[2])
	}
}

// serve relays one client until both directions have ended.
func serve(client *net.TCPConn, upstream string) {
	defer client.Close()
	c, err := net.Dial("tcp", upstream)
	if err != nil {
		log.Printf("relay: cannot reach %s: %v", upstream, err)
		return
	}
	up := c.(*net.TCPConn)
	defer up.Close()
	done := make(chan struct{})
	go func() {
		pipe(up, client)
		close(done)
	}()
	pipe(client, up)
	<-done
}

// pipe copies src to dst (spliced) until src ends or fails, then half-closes dst: the peer sees the
// end of stream its counterpart sent, and the other direction goes on.
func pipe(dst, src *net.TCPConn) {
	io.Copy(dst, src)
	dst.CloseWrite()
}
