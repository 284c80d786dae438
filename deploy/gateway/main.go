// Command basra-gateway serves basra.v1.RulesService over HTTP/1.1 with JSON bodies (the
// proto3 JSON mapping), on a port of its own, in front of a running gRPC server: every call is
// handed to that server over gRPC, so admission, limits, deadlines, metrics, logs, traces and
// signing are the server's own. It is grpc-gateway v2's generated reverse proxy (pb/), with
// generate_unbound_methods: each method is POST /basra.v1.RulesService/<Method>, the gRPC
// method's own path. docs/http.md describes the port; this file wires the pieces.
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	// Registers grpc-go's client-side health checking, so that the healthCheckConfig of the
	// published service config takes effect instead of being ignored.
	_ "google.golang.org/grpc/health"
	"google.golang.org/grpc/keepalive"

	basrav1 "example.com/basra-rules/gateway/pb/basra/v1"
)

// options are the command line's settings.
type options struct {
	listen         string
	backend        string
	serviceConfig  string
	maxBodyBytes   int64
	drainSeconds   float64
	defaultTimeout time.Duration
	logLevel       string
	describe       bool
	// TLS to the backend, as examples/go's client does it: trust backendCA alone, present
	// backendCert/backendKey when the server asks for a client certificate (mutual TLS).
	backendCA, backendServerName, backendCert, backendKey string
}

func parseOptions(args []string) (options, error) {
	var o options
	flags := flag.NewFlagSet("basra-gateway", flag.ContinueOnError)
	flags.StringVar(&o.listen, "listen", ":8080", "HTTP address to serve on, host:port (port 0: any free port)")
	flags.StringVar(&o.backend, "backend", "127.0.0.1:50051", "the gRPC server, host:port (a gRPC target)")
	flags.StringVar(&o.serviceConfig, "service-config", "",
		"the published gRPC service config (deploy/grpc-service-config.json), handed to the channel whole")
	flags.Int64Var(&o.maxBodyBytes, "max-body-bytes", 4<<20,
		"largest request body in bytes; a larger one is refused 413 BODY_TOO_LARGE")
	flags.Float64Var(&o.drainSeconds, "drain-seconds", 5,
		"on SIGTERM: seconds to keep serving with keep-alives off before the server shuts down")
	flags.DurationVar(&o.defaultTimeout, "default-timeout", 5*time.Second,
		"deadline of a call whose request has no Grpc-Timeout header")
	flags.StringVar(&o.logLevel, "log-level", "info", "debug, info, warn or error")
	flags.StringVar(&o.backendCA, "backend-ca", "",
		"PEM bundle of the CA that signed the gRPC server's certificate: TLS to the backend when set")
	flags.StringVar(&o.backendServerName, "backend-server-name", "",
		"the name the server's certificate must carry (default: the backend's host)")
	flags.StringVar(&o.backendCert, "backend-cert", "", "this client's certificate chain (PEM), for mutual TLS")
	flags.StringVar(&o.backendKey, "backend-key", "", "this client's key (PEM), for mutual TLS")
	flags.BoolVar(&o.describe, "describe", false,
		"print the gateway's refusal reasons and the gRPC code to HTTP status mapping as JSON, and exit")
	if err := flags.Parse(args); err != nil {
		return o, err
	}
	if flags.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments: %v", flags.Args())
	}
	if (o.backendCert == "") != (o.backendKey == "") || (o.backendCert != "" && o.backendCA == "") {
		return o, errors.New("--backend-cert and --backend-key go together, and with --backend-ca")
	}
	if o.maxBodyBytes < 1 || o.drainSeconds < 0 || o.defaultTimeout <= 0 {
		return o, errors.New("--max-body-bytes and --default-timeout must be positive, --drain-seconds not negative")
	}
	return o, nil
}

// clientKeepalive is the published client keepalive (docs/integration.md, "Client settings"):
// a connection that has read nothing for 10 s is pinged and dropped when no answer comes
// within 1 s, with or without calls (grpc-go also sets TCP_USER_TIMEOUT to the timeout).
var clientKeepalive = keepalive.ClientParameters{
	Time:                10 * time.Second,
	Timeout:             time.Second,
	PermitWithoutStream: true,
}

// dial makes the one channel to the backend, with the published client settings.
func dial(o options) (*grpc.ClientConn, error) {
	transport := insecure.NewCredentials()
	if o.backendCA != "" {
		config, err := tlsConfig(o)
		if err != nil {
			return nil, fmt.Errorf("TLS: %w", err)
		}
		transport = credentials.NewTLS(config)
	}
	dialOptions := []grpc.DialOption{
		grpc.WithTransportCredentials(transport),
		grpc.WithKeepaliveParams(clientKeepalive),
		// The server bounds its answers itself (--max-message-bytes, which may be set past
		// grpc-go's default 4 MiB); the gateway takes what it is sent.
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(math.MaxInt32)),
	}
	if o.serviceConfig != "" {
		config, err := os.ReadFile(o.serviceConfig)
		if err != nil {
			return nil, fmt.Errorf("service config: %w", err)
		}
		dialOptions = append(dialOptions, grpc.WithDefaultServiceConfig(string(config)))
	}
	return grpc.NewClient(o.backend, dialOptions...)
}

// tlsConfig trusts the CA bundle alone (not the system's roots) and presents this client's
// certificate when given one.
func tlsConfig(o options) (*tls.Config, error) {
	bundle, err := os.ReadFile(o.backendCA)
	if err != nil {
		return nil, err
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(bundle) {
		return nil, errors.New(o.backendCA + " holds no PEM certificate")
	}
	config := &tls.Config{RootCAs: roots, ServerName: o.backendServerName, MinVersion: tls.VersionTLS12}
	if o.backendCert != "" {
		pair, err := tls.LoadX509KeyPair(o.backendCert, o.backendKey)
		if err != nil {
			return nil, err
		}
		config.Certificates = []tls.Certificate{pair}
	}
	return config, nil
}

func main() {
	o, err := parseOptions(os.Args[1:])
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "basra-gateway:", err)
		os.Exit(2)
	}
	if o.describe {
		if err := describe(os.Stdout); err != nil {
			os.Exit(1)
		}
		return
	}
	logger := newLogger(o.logLevel)
	if err := run(o, logger); err != nil {
		logger.Error("stopped", "error", err.Error())
		os.Exit(1)
	}
}

func newLogger(level string) *slog.Logger {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		l = slog.LevelInfo
	}
	return slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: l}))
}

// run serves until SIGTERM or SIGINT, then drains: keep-alives off at once, new requests still
// served for --drain-seconds (a balancer may still send some while it learns the pod is going),
// then Shutdown, which waits for the calls in flight. Keep-alives go off by each answer from
// then on saying Connection: close, so its connection closes after it; an idle connection is
// not cut (http.Server.SetKeepAlivesEnabled would close it at once, and a request its client
// sent meanwhile would fail): it closes after its next answer, or at the Shutdown.
func run(o options, logger *slog.Logger) error {
	// Caught from the start: a SIGTERM before the server serves must not kill it undrained.
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	runtime.DefaultContextTimeout = o.defaultTimeout
	conn, err := dial(o)
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close() }()
	mux := newMux(o.maxBodyBytes, logger)
	if err := basrav1.RegisterRulesServiceHandler(context.Background(), mux, conn); err != nil {
		return err
	}
	var draining atomic.Bool
	listener, err := net.Listen("tcp", o.listen)
	if err != nil {
		return err
	}
	server := &http.Server{
		Handler:           closing(recovered(mux, logger), &draining),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	served := make(chan error, 1)
	go func() { served <- server.Serve(listener) }()
	logger.Info("serving", "address", listener.Addr().String(), "backend", o.backend)
	if o.serviceConfig == "" {
		logger.Warn("no --service-config: the channel has no retry policy and no health checking " +
			"(give it deploy/grpc-service-config.json, the published client settings)")
	}

	select {
	case err := <-served:
		return err
	case sig := <-stop:
		drain := time.Duration(o.drainSeconds * float64(time.Second))
		logger.Info("draining", "signal", sig.String(), "drain_seconds", o.drainSeconds)
		draining.Store(true)
		time.Sleep(drain)
		// The calls in flight have until their deadline: a call without Grpc-Timeout has
		// --default-timeout, which bounds the wait.
		ctx, cancel := context.WithTimeout(context.Background(), o.defaultTimeout)
		defer cancel()
		if err := server.Shutdown(ctx); err != nil {
			return err
		}
		logger.Info("stopped")
		return nil
	}
}

// closing answers with Connection: close once the drain has begun, so that each connection
// closes after its answer.
func closing(next http.Handler, draining *atomic.Bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if draining.Load() {
			w.Header().Set("Connection", "close")
		}
		next.ServeHTTP(w, r)
	})
}
