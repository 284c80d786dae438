// Package rules is a client of the Basra rules service (basra.v1.RulesService) for a Go lobby:
// one channel with the published retry policy and keepalive, a deadline on every call, health through
// grpc-go's health client, TLS (and mutual TLS) when given certificates, and refusals read as their reason codes.
// Match (match.go) keeps one match's state and guards every move with expected_seq.
package rules

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
	// Registers grpc-go's client-side health checking, so that a healthCheckConfig in the
	// service config takes effect instead of being ignored.
	_ "google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	basrav1 "example.com/basra-rules/lobby/pb/basra/v1"
)

// CallTimeout is the deadline of each call: a second suits every RPC at the default bot
// budget; the rest is room for the retry policy's backoff on a busy machine.
const CallTimeout = 5 * time.Second

// Keepalive is the published client keepalive (docs/integration.md, "Client settings"): a
// connection that has read nothing for 10 s (the least grpc-go allows) is pinged, and dropped
// when no answer comes within 1 s; grpc-go also sets the socket's TCP_USER_TIMEOUT to the
// Timeout, so a connection whose sent data goes unacknowledged for 1 s is dropped too. Without
// it a server lost without a reset keeps its share of the calls, each waiting out its
// deadline, for as long as Linux keeps the connection (about 15 minutes).
var Keepalive = keepalive.ClientParameters{
	Time:                10 * time.Second,
	Timeout:             time.Second,
	PermitWithoutStream: true,
}

// ServiceName is the name health reports the rules service under.
const ServiceName = "basra.v1.RulesService"

// Options say how to reach the service. The zero value is plaintext without a retry policy.
type Options struct {
	// ServiceConfig is the path of the published service config
	// (deploy/grpc-service-config.json): handed to the channel whole, as the file says.
	ServiceConfig string
	// CAFile is a PEM bundle of the CA that signed the server's certificate: TLS when set,
	// plaintext when empty.
	CAFile string
	// ServerName overrides the name the server's certificate must carry (default: the
	// target's host).
	ServerName string
	// CertFile and KeyFile are this client's certificate chain and key (PEM), for a server
	// that requires one (mutual TLS).
	CertFile, KeyFile string
	// Timeout is the deadline of each call (default CallTimeout).
	Timeout time.Duration
}

// Client is one channel to the rules service; safe for concurrent use.
type Client struct {
	conn    *grpc.ClientConn
	rules   basrav1.RulesServiceClient
	health  healthpb.HealthClient
	timeout time.Duration
}

// Dial makes a client for target ("host:port"). It fails at once on an unreadable or invalid
// service config or CA bundle, so a broken policy shows at start-up, not under load.
func Dial(target string, options Options, extra ...grpc.DialOption) (*Client, error) {
	transport := insecure.NewCredentials()
	if options.CAFile != "" {
		config, err := tlsConfig(options)
		if err != nil {
			return nil, fmt.Errorf("TLS: %w", err)
		}
		transport = credentials.NewTLS(config)
	}
	dial := []grpc.DialOption{grpc.WithTransportCredentials(transport), grpc.WithKeepaliveParams(Keepalive)}
	if options.ServiceConfig != "" {
		// The file is passed as it is, whatever it holds besides the retry policy.
		config, err := os.ReadFile(options.ServiceConfig)
		if err != nil {
			return nil, fmt.Errorf("service config: %w", err)
		}
		dial = append(dial, grpc.WithDefaultServiceConfig(string(config)))
	}
	conn, err := grpc.NewClient(target, append(dial, extra...)...)
	if err != nil {
		return nil, err
	}
	timeout := options.Timeout
	if timeout <= 0 {
		timeout = CallTimeout
	}
	return &Client{
		conn:    conn,
		rules:   basrav1.NewRulesServiceClient(conn),
		health:  healthpb.NewHealthClient(conn),
		timeout: timeout,
	}, nil
}

// tlsConfig trusts the CA bundle alone (not the system's roots) and presents this client's
// certificate when given one.
func tlsConfig(options Options) (*tls.Config, error) {
	bundle, err := os.ReadFile(options.CAFile)
	if err != nil {
		return nil, err
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(bundle) {
		return nil, errors.New(options.CAFile + " holds no PEM certificate")
	}
	config := &tls.Config{RootCAs: roots, ServerName: options.ServerName, MinVersion: tls.VersionTLS12}
	if options.CertFile != "" {
		pair, err := tls.LoadX509KeyPair(options.CertFile, options.KeyFile)
		if err != nil {
			return nil, err
		}
		config.Certificates = []tls.Certificate{pair}
	}
	return config, nil
}

// Close closes the channel.
func (c *Client) Close() error { return c.conn.Close() }

// Serving reports whether the service answers SERVING to a health check.
func (c *Client) Serving(ctx context.Context) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	reply, err := c.health.Check(ctx, &healthpb.HealthCheckRequest{Service: ServiceName})
	if err != nil {
		return false, refusalOf(err)
	}
	return reply.GetStatus() == healthpb.HealthCheckResponse_SERVING, nil
}

// call runs one RPC under the client's deadline and turns its error into a *Refusal.
func call[Req, Resp any](
	ctx context.Context, c *Client, method func(context.Context, Req, ...grpc.CallOption) (Resp, error), request Req,
) (Resp, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	response, err := method(ctx, request)
	if err != nil {
		var none Resp
		return none, refusalOf(err)
	}
	return response, nil
}

// NewMatch starts a match (an empty seed lets the server draw one).
func (c *Client) NewMatch(ctx context.Context, request *basrav1.NewMatchRequest) (*basrav1.NewMatchResponse, error) {
	return call(ctx, c, c.rules.NewMatch, request)
}

// Apply applies one action to a state.
func (c *Client) Apply(ctx context.Context, request *basrav1.ApplyRequest) (*basrav1.ApplyResponse, error) {
	return call(ctx, c, c.rules.Apply, request)
}

// PlayerView returns what one seat, or a spectator, may see.
func (c *Client) PlayerView(ctx context.Context, request *basrav1.PlayerViewRequest) (*basrav1.PlayerViewResponse, error) {
	return call(ctx, c, c.rules.PlayerView, request)
}

// SuggestMove asks the bot for the seat to move's action.
func (c *Client) SuggestMove(ctx context.Context, request *basrav1.SuggestMoveRequest) (*basrav1.SuggestMoveResponse, error) {
	return call(ctx, c, c.rules.SuggestMove, request)
}

// Replay rebuilds a match from its seed and actions.
func (c *Client) Replay(ctx context.Context, request *basrav1.ReplayRequest) (*basrav1.ReplayResponse, error) {
	return call(ctx, c, c.rules.Replay, request)
}
