package rules_test

// The servers the tests play against: real `basra-rules serve` processes, started by
// TestMain on loopback ports they choose themselves (read back from their "serving" log
// line), checked SERVING through grpc-go's health client, and stopped at the end.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"example.com/basra-rules/lobby/rules"
)

const (
	// startTimeout bounds a server's start, health included; stopTimeout its drain after
	// SIGTERM, before it is killed.
	startTimeout = 60 * time.Second
	stopTimeout  = 20 * time.Second
	// logTail is how much of a server's output a failure shows.
	logTail = 4000
)

// serverCommand is the basra-rules executable: $BASRA_RULES_BIN, else the repository's
// .venv/bin/basra-rules (this package lives in examples/go/rules). It is made absolute, as
// the server runs from the repository's root.
func serverCommand() string {
	bin := os.Getenv("BASRA_RULES_BIN")
	if bin == "" {
		bin = filepath.Join(repoRoot(), ".venv", "bin", "basra-rules")
	} else if !strings.ContainsRune(bin, filepath.Separator) {
		return bin // a command on PATH
	}
	if absolute, err := filepath.Abs(bin); err == nil {
		return absolute
	}
	return bin
}

// repoRoot is the repository's root, relative to this package's folder (go test's working
// directory).
func repoRoot() string { return filepath.Join("..", "..", "..") }

// serviceConfig is the published retry policy, read whole by rules.Dial.
func serviceConfig() string {
	return filepath.Join(repoRoot(), "deploy", "grpc-service-config.json")
}

// tail keeps the last logTail bytes written to it.
type tail struct {
	mu   sync.Mutex
	text []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.text = append(t.text, p...)
	if len(t.text) > logTail {
		t.text = t.text[len(t.text)-logTail:]
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.text)
}

// server is one running `basra-rules serve`.
type server struct {
	name    string
	address string
	options rules.Options // how its clients reach it (TLS or plaintext)
	cmd     *exec.Cmd
	exited  chan struct{}
	log     *tail
}

// ourEnvironment is this process's environment without BASRA_* settings, so that a setting of
// the caller's shell cannot change a server the test configures itself.
func ourEnvironment() []string {
	var kept []string
	for _, entry := range os.Environ() {
		if !strings.HasPrefix(entry, "BASRA_") {
			kept = append(kept, entry)
		}
	}
	return kept
}

// startServer runs `basra-rules serve` on 127.0.0.1 with env added and flags appended, and
// returns once it answers SERVING through a client made with options.
func startServer(name string, options rules.Options, env []string, flags ...string) (*server, error) {
	args := append([]string{
		"serve", "--host", "127.0.0.1", "--port", "0", "--metrics-port", "0", "--log-format", "json",
	}, flags...)
	cmd := exec.Command(serverCommand(), args...)
	cmd.Dir = repoRoot()
	cmd.Env = append(ourEnvironment(), env...)
	cmd.SysProcAttr = dieWithParent()
	log := &tail{}
	cmd.Stderr = log
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("cannot run %s: %w", serverCommand(), err)
	}
	s := &server{name: name, options: options, cmd: cmd, exited: make(chan struct{}), log: log}
	ports := make(chan int, 1)
	go func() {
		// Every line is kept for failures; the "serving" line names the port (JSON logs).
		lines := bufio.NewScanner(stdout)
		lines.Buffer(make([]byte, 0, 64*1024), 1024*1024)
		for lines.Scan() {
			fmt.Fprintln(log, lines.Text())
			var line struct {
				Event string `json:"event"`
				Port  int    `json:"port"`
			}
			if json.Unmarshal(lines.Bytes(), &line) == nil && line.Event == "serving" {
				ports <- line.Port
			}
		}
		_ = cmd.Wait()
		close(s.exited)
	}()
	deadline := time.After(startTimeout)
	select {
	case port := <-ports:
		s.address = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	case <-s.exited:
		return nil, fmt.Errorf("%s server exited at start (%v):\n%s", name, cmd.ProcessState, log)
	case <-deadline:
		s.stop()
		return nil, fmt.Errorf("%s server: no \"serving\" line within %v:\n%s", name, startTimeout, log)
	}
	if err := s.waitServing(deadline); err != nil {
		s.stop()
		return nil, err
	}
	return s, nil
}

// waitServing asks the health service until it says SERVING, as a kubelet or gateway would.
func (s *server) waitServing(deadline <-chan time.Time) error {
	client, err := rules.Dial(s.address, s.options)
	if err != nil {
		return err
	}
	defer client.Close()
	for {
		serving, err := client.Serving(context.Background())
		if serving {
			return nil
		}
		select {
		case <-s.exited:
			return fmt.Errorf("%s server exited before SERVING (%v):\n%s", s.name, err, s.log)
		case <-deadline:
			return fmt.Errorf("%s server not SERVING within %v (%v):\n%s", s.name, startTimeout, err, s.log)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// stop sends SIGTERM (the server drains its calls and exits), then kills it if it lingers.
func (s *server) stop() {
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(stopTimeout):
		_ = s.cmd.Process.Kill()
		<-s.exited
	}
}

// client dials the server with the published service config (and its TLS, if it has TLS).
func (s *server) client(t *testing.T) *rules.Client {
	t.Helper()
	options := s.options
	options.ServiceConfig = serviceConfig()
	client, err := rules.Dial(s.address, options)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })
	return client
}

// The servers of this run, started together by TestMain; a test asks for its own with need.
var (
	servers  = map[string]*server{}
	startErr = map[string]error{}
)

// need is the named server; without it the test fails under CI=true and skips elsewhere
// (a Go developer without the Python environment set up).
func need(t *testing.T, name string) *server {
	t.Helper()
	if s := servers[name]; s != nil {
		return s
	}
	err := startErr[name]
	if os.Getenv("CI") != "true" && errors.Is(err, os.ErrNotExist) {
		t.Skipf("no basra-rules to start (%v): run `bash .ci/setup dev` at the repository root, or set BASRA_RULES_BIN", err)
	}
	t.Fatalf("the %s server did not start: %v", name, err)
	return nil
}

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

// run starts every server at once (each takes a second or two), runs the tests, stops them.
func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "basra-go-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	trust, err := makeTrust(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	type spec struct {
		options rules.Options
		env     []string
		flags   []string
	}
	specs := map[string]spec{
		"plain": {},
		// Mutual TLS and signed states together: every call of its tests is both.
		"trusted": {
			options: rules.Options{CAFile: trust.caFile, CertFile: trust.certFile, KeyFile: trust.keyFile},
			env:     trust.env,
		},
		// One call held at a time: the next is shed (RESOURCE_EXHAUSTED, OVERLOADED).
		"shedding": {flags: []string{"--admission-limit", "1", "--workers", "1"}},
	}
	if _, err := exec.LookPath(serverCommand()); err != nil {
		for name := range specs {
			startErr[name] = err
		}
		return m.Run()
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	for name, spec := range specs {
		wg.Go(func() {
			s, err := startServer(name, spec.options, spec.env, spec.flags...)
			mu.Lock()
			defer mu.Unlock()
			servers[name], startErr[name] = s, err
		})
	}
	wg.Wait()
	for name, s := range servers {
		if s == nil {
			delete(servers, name)
		}
	}
	defer func() {
		for _, s := range servers {
			wg.Go(s.stop)
		}
		wg.Wait()
	}()
	return m.Run()
}
