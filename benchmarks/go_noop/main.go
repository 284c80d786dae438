// Command go_noop serves the gRPC health Check and nothing else: grpc-go's cost of a no-op on
// this machine, beside the bare grpcio server of benchmarks/bench_server.py (--bare). Both
// answer the same request (an empty HealthCheckRequest) with the same reply (SERVING), so a
// load generator sends them the same bytes; benchmarks/servers.py builds and starts it.
package main

import (
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"strconv"
	"syscall"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

func main() {
	host := flag.String("host", "127.0.0.1", "address to bind")
	port := flag.Int("port", 0, "port to bind (0: a free one, printed on the READY line)")
	flag.Parse()

	listener, err := net.Listen("tcp", net.JoinHostPort(*host, strconv.Itoa(*port)))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	server := grpc.NewServer()
	checks := health.NewServer()
	// The two names the chart's probes ask, as the bare grpcio server sets them.
	checks.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	checks.SetServingStatus("basra.v1.RulesService", healthpb.HealthCheckResponse_SERVING)
	healthpb.RegisterHealthServer(server, checks)

	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, os.Interrupt)
	go func() {
		<-stop
		server.Stop()
	}()
	// The same READY line as bench_server.py: the port, then the pid of every serving process.
	fmt.Printf("READY %d %d\n", listener.Addr().(*net.TCPAddr).Port, os.Getpid())
	if err := server.Serve(listener); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
