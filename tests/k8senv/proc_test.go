package k8senv_test

import (
	"bufio"
	"encoding/hex"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// proc is a process seen in /proc.
type proc struct {
	pid    int
	binary string // base name of /proc/<pid>/exe
	zombie bool
}

// childProcesses returns the live children of the process pid.
func childProcesses(t *testing.T, pid int) []proc {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var out []proc
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		p, ppid, ok := readProc(child)
		if ok && ppid == pid {
			out = append(out, p)
		}
	}
	return out
}

// readProc reads /proc/<pid>/stat and exe; ok is false once the process is
// gone.
func readProc(pid int) (p proc, ppid int, ok bool) {
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return proc{}, 0, false
	}
	// "pid (comm) state ppid ...": comm may hold spaces and parentheses.
	rest := string(stat[strings.LastIndexByte(string(stat), ')')+1:])
	fields := strings.Fields(rest)
	if len(fields) < 2 {
		return proc{}, 0, false
	}
	ppid, _ = strconv.Atoi(fields[1])
	exe, _ := os.Readlink(filepath.Join("/proc", strconv.Itoa(pid), "exe"))
	return proc{pid: pid, binary: filepath.Base(exe), zombie: fields[0] == "Z"}, ppid, true
}

// listenAddrs returns the TCP addresses process pid listens on.
func listenAddrs(t *testing.T, pid int) []net.TCPAddr {
	t.Helper()
	fdDir := filepath.Join("/proc", strconv.Itoa(pid), "fd")
	fds, err := os.ReadDir(fdDir)
	if err != nil {
		t.Fatal(err)
	}
	inodes := map[string]bool{}
	for _, fd := range fds {
		target, err := os.Readlink(filepath.Join(fdDir, fd.Name()))
		if err == nil && strings.HasPrefix(target, "socket:[") {
			inodes[strings.TrimSuffix(strings.TrimPrefix(target, "socket:["), "]")] = true
		}
	}
	var addrs []net.TCPAddr
	for _, table := range []string{"tcp", "tcp6"} {
		for _, l := range listeningSockets(t, filepath.Join("/proc", strconv.Itoa(pid), "net", table)) {
			if inodes[l.inode] {
				addrs = append(addrs, l.addr)
			}
		}
	}
	return addrs
}

type socket struct {
	addr  net.TCPAddr
	inode string
}

// listeningSockets parses a /proc/net/tcp{,6} table and returns its LISTEN
// sockets.
func listeningSockets(t *testing.T, path string) []socket {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	var out []socket
	sc := bufio.NewScanner(f)
	sc.Scan() // header
	for sc.Scan() {
		// sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
		fields := strings.Fields(sc.Text())
		if len(fields) < 10 || fields[3] != "0A" { // 0A: TCP_LISTEN
			continue
		}
		host, port, _ := strings.Cut(fields[1], ":")
		out = append(out, socket{addr: net.TCPAddr{IP: procIP(t, host), Port: hexPort(t, port)}, inode: fields[9]})
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// procIP decodes an address of /proc/net/tcp{,6}: 32-bit words in host
// (little-endian) order.
func procIP(t *testing.T, s string) net.IP {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil || len(b)%4 != 0 {
		t.Fatalf("bad address %q in /proc/net/tcp", s)
	}
	for i := 0; i < len(b); i += 4 {
		b[i], b[i+1], b[i+2], b[i+3] = b[i+3], b[i+2], b[i+1], b[i]
	}
	return net.IP(b)
}

func hexPort(t *testing.T, s string) int {
	t.Helper()
	p, err := strconv.ParseUint(s, 16, 16)
	if err != nil {
		t.Fatalf("bad port %q in /proc/net/tcp", s)
	}
	return int(p)
}
