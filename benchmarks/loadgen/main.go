// Command loadgen is the scale-on-cores load (benchmarks/wire_load.py runs it): Kafka requests that
// Python encoded, sent on raw TCP connections so that the load costs the cores as little as can
// be beside the brokers it measures: Produce frames go out with sendfile from a file in memory,
// and the record batches of Fetch answers are dropped in the kernel (recv with MSG_TRUNC) after
// their headers are read, so neither direction copies the records through this process. What is
// left is mostly the kernel's: on loopback the sender's system call also runs the receiver's TCP.
//
// It reads one JSON job on stdin and writes one JSON result on stdout; any error code in an
// answer, a closed connection or a short read is one line on stderr and exit status 1.
//
//	produce: each connection sends its pre-encoded Produce v8 frames in turn, `requests` in all,
//	         at most `in_flight` unanswered, and checks every partition's error code.
//	fetch:   each connection sends its Fetch v4 template with each partition's fetch_offset
//	         patched in (8 bytes at offset_at[i]), one at a time, and walks the record batches
//	         of each answer for the next offset and the record count, until all connections
//	         together have read `records` records; a partition read up to its high watermark
//	         starts again at 0 (a lap), so a short topic can be read for as long as wanted.
//
// A job that has not finished after timeout_s seconds fails.
//
// The result: records, wire_bytes (frames sent, or records fields read), requests, seconds and
// cpu_s (this process's user + system CPU over the same span, from getrusage).
package main

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

type job struct {
	Mode     string  `json:"mode"`      // "produce" or "fetch"
	InFlight int     `json:"in_flight"` // produce: unanswered requests per connection
	Records  int64   `json:"records"`   // fetch: stop once all connections have read this many
	Timeout  float64 `json:"timeout_s"`
	Threads  int     `json:"threads"` // GOMAXPROCS; 0: 1
	Conns    []conn  `json:"conns"`
}

type conn struct {
	Addr            string   `json:"addr"`
	Frames          [][]byte `json:"frames"`            // produce: whole frames, size prefix included
	Requests        int      `json:"requests"`          // produce: frames to send, cycling through Frames
	RecordsPerFrame int64    `json:"records_per_frame"` // produce
	Template        []byte   `json:"template"`          // fetch: one whole Fetch v4 frame
	Partitions      []int32  `json:"partitions"`        // fetch: the partitions in Template, in order
	OffsetAt        []int    `json:"offset_at"`         // fetch: where each partition's fetch_offset is
}

type result struct {
	Records   int64   `json:"records"`
	WireBytes int64   `json:"wire_bytes"`
	Requests  int64   `json:"requests"`
	Laps      int64   `json:"laps"` // fetch: partitions read to their high watermark and begun again
	Seconds   float64 `json:"seconds"`
	CPUs      float64 `json:"cpu_s"`
}

var be = binary.BigEndian

func fail(format string, args ...interface{}) {
	fmt.Fprintf(os.Stderr, "loadgen: "+format+"\n", args...)
	os.Exit(1)
}

func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		fail("getrusage: %v", err)
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

// reader walks one answer's bytes; any read past the end is a malformed answer.
type reader struct {
	b    []byte
	pos  int
	what string
}

func (r *reader) take(n int) []byte {
	if n < 0 || r.pos+n > len(r.b) {
		fail("%s: answer cut short at byte %d of %d", r.what, r.pos, len(r.b))
	}
	s := r.b[r.pos : r.pos+n]
	r.pos += n
	return s
}

func (r *reader) i16() int16 { return int16(be.Uint16(r.take(2))) }
func (r *reader) i32() int32 { return int32(be.Uint32(r.take(4))) }
func (r *reader) i64() int64 { return int64(be.Uint64(r.take(8))) }

func (r *reader) str() string { // STRING or NULLABLE_STRING (-1: null)
	n := int(r.i16())
	if n < 0 {
		return ""
	}
	return string(r.take(n))
}

// readFrame reads one size-prefixed answer into buf (grown when too small) and returns it.
func readFrame(in *bufio.Reader, buf []byte, addr string) []byte {
	var size [4]byte
	if _, err := io.ReadFull(in, size[:]); err != nil {
		fail("%s: reading an answer's size: %v", addr, err)
	}
	n := int(int32(be.Uint32(size[:])))
	if n < 4 {
		fail("%s: answer of %d bytes", addr, n)
	}
	if cap(buf) < n {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	if _, err := io.ReadFull(in, buf); err != nil {
		fail("%s: reading an answer of %d bytes: %v", addr, n, err)
	}
	return buf
}

func correlationID(frame []byte) int32 { return int32(be.Uint32(frame[8:12])) } // after size, key, version

// frameFile puts a connection's frames in an unlinked file in memory (/dev/shm where there is
// one), so they go out with sendfile: no copy into the kernel, as a broker's Fetch answers go.
func frameFile(frames [][]byte) (*os.File, []int64) {
	dir := "/dev/shm"
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		dir = ""
	}
	f, err := os.CreateTemp(dir, "kcompat-loadgen-")
	if err != nil {
		fail("a file for the Produce frames: %v", err)
	}
	os.Remove(f.Name())
	at := make([]int64, len(frames))
	pos := int64(0)
	for i, b := range frames {
		if _, err := f.Write(b); err != nil {
			fail("writing the Produce frames: %v", err)
		}
		at[i] = pos
		pos += int64(len(b))
	}
	return f, at
}

// produce sends c.Requests frames with at most inFlight unanswered; the records acknowledged.
func produce(c *conn, sock net.Conn, inFlight int) (records, wire int64) {
	f, at := frameFile(c.Frames)
	defer f.Close()
	tcp := sock.(*net.TCPConn)
	want := make(chan int32, inFlight) // correlation ids sent and not yet answered, in order
	go func() {
		for i := 0; i < c.Requests; i++ {
			k := i % len(c.Frames)
			want <- correlationID(c.Frames[k]) // blocks while inFlight requests are unanswered
			if _, err := f.Seek(at[k], io.SeekStart); err != nil {
				fail("%s: %v", c.Addr, err)
			}
			size := int64(len(c.Frames[k]))
			if n, err := tcp.ReadFrom(&io.LimitedReader{R: f, N: size}); err != nil || n != size {
				fail("%s: sending Produce: %d of %d bytes sent (%v)", c.Addr, n, size, err)
			}
		}
	}()
	in := bufio.NewReaderSize(sock, 64<<10)
	buf := make([]byte, 4096)
	for i := 0; i < c.Requests; i++ {
		buf = readFrame(in, buf, c.Addr)
		r := &reader{b: buf, what: c.Addr + " Produce"}
		if id, expected := r.i32(), <-want; id != expected {
			fail("%s: Produce answer with correlation id %d, expected %d", c.Addr, id, expected)
		}
		for t := r.i32(); t > 0; t-- {
			topic := r.str()
			for p := r.i32(); p > 0; p-- {
				index, code := r.i32(), r.i16()
				r.take(24) // base offset, log append time, log start offset
				for e := r.i32(); e > 0; e-- {
					r.i32()
					r.str()
				}
				message := r.str()
				if code != 0 {
					fail("Produce to %s-%d on %s: error %d %s", topic, index, c.Addr, code, message)
				}
			}
		}
		records += c.RecordsPerFrame
		wire += int64(len(c.Frames[i%len(c.Frames)]))
	}
	return records, wire
}

// stream reads one answer straight off the socket: the small fields through a buffer, and the
// record batches' bodies dropped in the kernel (recv with MSG_TRUNC: TCP discards the bytes
// without copying them out), so the load does not pay a copy of every byte a broker sends.
type stream struct {
	in      *bufio.Reader
	raw     syscall.RawConn
	left    int // bytes of the current answer not read yet
	scratch []byte
	what    string
}

// sink is never written: with MSG_TRUNC only its length counts (and its pages are never touched).
var sink = make([]byte, 1<<20)

func (s *stream) take(n int) []byte {
	if n < 0 || n > s.left {
		fail("%s: answer cut short (%d bytes wanted, %d left)", s.what, n, s.left)
	}
	if cap(s.scratch) < n {
		s.scratch = make([]byte, n)
	}
	b := s.scratch[:n]
	if _, err := io.ReadFull(s.in, b); err != nil {
		fail("%s: %v", s.what, err)
	}
	s.left -= n
	return b
}

// begin reads the next answer's size prefix: the bytes take and skip may then read.
func (s *stream) begin() {
	s.left = 4
	s.left = int(s.i32())
	if s.left < 4 {
		fail("%s: answer of %d bytes", s.what, s.left)
	}
}

func (s *stream) i16() int16 { return int16(be.Uint16(s.take(2))) }
func (s *stream) i32() int32 { return int32(be.Uint32(s.take(4))) }
func (s *stream) i64() int64 { return int64(be.Uint64(s.take(8))) }

func (s *stream) str() string {
	n := int(s.i16())
	if n < 0 {
		return ""
	}
	return string(s.take(n))
}

func (s *stream) skip(n int) {
	if n < 0 || n > s.left {
		fail("%s: answer cut short (%d bytes to skip, %d left)", s.what, n, s.left)
	}
	s.left -= n
	if k := s.in.Buffered(); k > 0 { // what the buffer already holds first
		if k > n {
			k = n
		}
		s.in.Discard(k)
		n -= k
	}
	for n > 0 {
		want := n
		if want > len(sink) {
			want = len(sink)
		}
		var got int
		var rerr error
		err := s.raw.Read(func(fd uintptr) bool {
			got, _, rerr = syscall.Recvfrom(int(fd), sink[:want], syscall.MSG_TRUNC|syscall.MSG_DONTWAIT)
			return rerr != syscall.EAGAIN
		})
		if err == nil {
			err = rerr
		}
		if err != nil || got <= 0 {
			fail("%s: answer cut short with %d bytes to come (%v)", s.what, n, err)
		}
		n -= got
	}
}

// records walks a records field of `size` bytes: the offset after its last whole batch and
// the records in its whole batches (a partial batch at the end is skipped).
func (s *stream) records(size int, offset int64) (int64, int64) {
	n := int64(0)
	for size >= 61 {
		head := s.take(61)
		base, length := int64(be.Uint64(head)), int(int32(be.Uint32(head[8:])))
		if length < 49 {
			fail("%s: a batch of %d bytes at offset %d", s.what, length, base)
		}
		body := 12 + length - 61
		size -= 61
		if body > size {
			break
		}
		offset = base + int64(int32(be.Uint32(head[23:]))) + 1 // last offset delta
		n += int64(int32(be.Uint32(head[57:])))                // record count
		s.skip(body)
		size -= body
	}
	s.skip(size)
	return offset, n
}

// fetch reads c's partitions from offset 0 until total reaches target; this connection's records.
func fetch(c *conn, sock net.Conn, total *int64, target int64) (records, wire, requests, laps int64) {
	req := append([]byte(nil), c.Template...)
	offsets := make([]int64, len(c.Partitions))
	slot := make(map[int32]int, len(c.Partitions))
	for i, p := range c.Partitions {
		slot[p] = i
	}
	expected := correlationID(req)
	raw, err := sock.(*net.TCPConn).SyscallConn()
	if err != nil {
		fail("%s: %v", c.Addr, err)
	}
	s := &stream{in: bufio.NewReaderSize(sock, 64<<10), raw: raw, what: c.Addr + " Fetch"}
	for atomic.LoadInt64(total) < target {
		for i, at := range c.OffsetAt {
			be.PutUint64(req[at:], uint64(offsets[i]))
		}
		if _, err := sock.Write(req); err != nil {
			fail("%s: sending Fetch: %v", c.Addr, err)
		}
		requests++
		s.begin()
		if id := s.i32(); id != expected {
			fail("%s: Fetch answer with correlation id %d, expected %d", c.Addr, id, expected)
		}
		s.i32() // throttle time
		n := int64(0)
		for t := s.i32(); t > 0; t-- {
			topic := s.str()
			for p := s.i32(); p > 0; p-- {
				index, code, hw := s.i32(), s.i16(), s.i64()
				s.i64() // last stable offset
				if aborted := s.i32(); aborted > 0 {
					s.skip(16 * int(aborted))
				}
				size := int(s.i32())
				if code != 0 {
					fail("Fetch %s-%d on %s: error %d", topic, index, c.Addr, code)
				}
				i, ok := slot[index]
				if !ok {
					fail("Fetch on %s: an answer for %s-%d, not asked for", c.Addr, topic, index)
				}
				if size <= 0 {
					continue
				}
				var k int64
				offsets[i], k = s.records(size, offsets[i])
				if hw > 0 && offsets[i] >= hw {
					offsets[i] = 0
					laps++
				}
				n += k
				wire += int64(size)
			}
		}
		if s.left != 0 {
			fail("%s: %d bytes after the last partition of an answer", s.what, s.left)
		}
		records += n
		atomic.AddInt64(total, n)
	}
	return records, wire, requests, laps
}

func main() {
	var j job
	if err := json.NewDecoder(os.Stdin).Decode(&j); err != nil {
		fail("reading the job on stdin: %v", err)
	}
	if j.Mode != "produce" && j.Mode != "fetch" {
		fail("mode %q: expected produce or fetch", j.Mode)
	}
	if j.Threads < 1 {
		j.Threads = 1 // measured: 0.55 CPU s per GB produced against 0.75-0.93 with 2 (goroutine hand-offs across threads)
	}
	runtime.GOMAXPROCS(j.Threads)
	if j.InFlight < 1 {
		j.InFlight = 1
	}
	socks := make([]net.Conn, len(j.Conns))
	for i := range j.Conns {
		c := &j.Conns[i]
		if j.Mode == "produce" && (len(c.Frames) == 0 || c.Requests < 1) {
			fail("%s: no Produce frames to send", c.Addr)
		}
		if j.Mode == "fetch" && (len(c.Partitions) != len(c.OffsetAt) || len(c.Template) < 12) {
			fail("%s: a Fetch template needs one offset position per partition", c.Addr)
		}
		s, err := net.Dial("tcp", c.Addr)
		if err != nil {
			fail("%v", err)
		}
		socks[i] = s
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		out   result
		total int64
	)
	if j.Timeout > 0 {
		time.AfterFunc(time.Duration(j.Timeout*float64(time.Second)), func() {
			if j.Mode == "fetch" {
				fail("fetch not done after %g s: %d of %d records read", j.Timeout, atomic.LoadInt64(&total), j.Records)
			}
			fail("produce not done after %g s", j.Timeout)
		})
	}
	cpu0, t0 := cpuSeconds(), time.Now()
	for i := range j.Conns {
		wg.Add(1)
		go func(c *conn, s net.Conn) {
			defer wg.Done()
			var records, wire, requests, laps int64
			if j.Mode == "produce" {
				records, wire = produce(c, s, j.InFlight)
				requests = int64(c.Requests)
			} else {
				records, wire, requests, laps = fetch(c, s, &total, j.Records)
			}
			mu.Lock()
			out.Records += records
			out.WireBytes += wire
			out.Requests += requests
			out.Laps += laps
			mu.Unlock()
		}(&j.Conns[i], socks[i])
	}
	wg.Wait()
	out.Seconds, out.CPUs = time.Since(t0).Seconds(), cpuSeconds()-cpu0
	for _, s := range socks {
		s.Close()
	}
	if err := json.NewEncoder(os.Stdout).Encode(out); err != nil {
		fail("writing the result: %v", err)
	}
}
