// Command blackhole measures what the example's channel (rules.Dial: the published keepalive
// and service config) sees when one of two servers is lost without a reset; testkit/blackhole.py
// runs it inside its network namespace. It sends NewMatch at -rate for -seconds, each call
// under -timeout, and prints {"event":"ready","at":T} and then {"event":"calls","calls":[[T,
// CODE], ...]}, T the send time in CLOCK_MONOTONIC seconds (Python's time.monotonic).
//
//	blackhole -addresses 198.18.0.1:50051,198.18.0.2:50051 -service-config ../../deploy/grpc-service-config.json
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"time"
	"unicode"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"

	basrav1 "example.com/basra-rules/lobby/pb/basra/v1"
	"example.com/basra-rules/lobby/rules"
)

// warmUpCalls round both servers before the measured calls.
const warmUpCalls = 10

func monotonic() float64 {
	var now unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &now); err != nil {
		panic(err)
	}
	return float64(now.Sec) + float64(now.Nsec)/1e9
}

// codeName spells a status code as gRPC's other languages do (DeadlineExceeded: DEADLINE_EXCEEDED).
func codeName(err error) string {
	if err == nil {
		return "OK"
	}
	var refusal *rules.Refusal
	if !errors.As(err, &refusal) {
		return "UNKNOWN"
	}
	var name strings.Builder
	for i, r := range refusal.Code.String() {
		if i > 0 && unicode.IsUpper(r) {
			name.WriteByte('_')
		}
		name.WriteRune(unicode.ToUpper(r))
	}
	return name.String()
}

func main() {
	addresses := flag.String("addresses", "", "the servers, host:port,host:port")
	config := flag.String("service-config", "", "the published service config")
	seconds := flag.Float64("seconds", 10, "how long to send calls")
	rate := flag.Float64("rate", 50, "calls a second")
	timeout := flag.Duration("timeout", time.Second, "each call's deadline")
	flag.Parse()
	if err := run(*addresses, *config, *seconds, *rate, *timeout); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run(addresses, config string, seconds, rate float64, timeout time.Duration) error {
	servers := manual.NewBuilderWithScheme("blackhole")
	state := resolver.State{}
	for _, address := range strings.Split(addresses, ",") {
		state.Addresses = append(state.Addresses, resolver.Address{Addr: address})
	}
	servers.InitialState(state)
	options := rules.Options{ServiceConfig: config, Timeout: timeout}
	client, err := rules.Dial("blackhole:///servers", options, grpc.WithResolvers(servers))
	if err != nil {
		return err
	}
	defer client.Close()
	ctx := context.Background()
	for n := 0; n < warmUpCalls; n++ {
		if _, err := client.NewMatch(ctx, &basrav1.NewMatchRequest{Seed: []byte(fmt.Sprint("warm-", n))}); err != nil {
			return fmt.Errorf("warm-up: %w", err)
		}
	}
	ready, _ := json.Marshal(map[string]any{"event": "ready", "at": monotonic()})
	fmt.Println(string(ready))
	var (
		mu    sync.Mutex
		calls [][2]any
		wg    sync.WaitGroup
	)
	start := time.Now()
	for n := 0; float64(n)/rate < seconds; n++ {
		time.Sleep(time.Until(start.Add(time.Duration(float64(n) / rate * float64(time.Second)))))
		sent := monotonic()
		wg.Add(1)
		go func(n int) {
			defer wg.Done()
			_, err := client.NewMatch(ctx, &basrav1.NewMatchRequest{Seed: []byte(fmt.Sprint("call-", n))})
			mu.Lock()
			calls = append(calls, [2]any{sent, codeName(err)})
			mu.Unlock()
		}(n)
	}
	wg.Wait()
	sort.Slice(calls, func(i, j int) bool { return calls[i][0].(float64) < calls[j][0].(float64) })
	done, _ := json.Marshal(map[string]any{"event": "calls", "calls": calls})
	fmt.Println(string(done))
	return nil
}
