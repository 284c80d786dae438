package rules_test

// A call shed by a full server (RESOURCE_EXHAUSTED, OVERLOADED) is retried to success by the
// published service config. The server holds one call at a time (--admission-limit 1); the
// test fills that slot itself and frees it between the refused attempt and its retry, so the
// outcome depends on no timing.

import (
	"context"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/stats"

	basrav1 "example.com/basra-rules/lobby/pb/basra/v1"
	"example.com/basra-rules/lobby/rules"
)

// waitLimit bounds each wait of this test for the server (never reached when it passes).
const waitLimit = 20 * time.Second

// holdSlot opens a NewMatch call and sends nothing but its headers: the server admits it (a
// held call) and its worker thread waits for the request body (the grpc sync server reads a
// unary request in the thread it gave the call, after admission). release sends the body and
// reads the answer: the call ends as any other and lets go of the slot.
func holdSlot(t *testing.T, address string) (release func()) {
	t.Helper()
	conn, err := grpc.NewClient(address, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	stream, err := conn.NewStream(ctx, &grpc.StreamDesc{}, basrav1.RulesService_NewMatch_FullMethodName)
	if err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	release = func() {
		once.Do(func() {
			defer conn.Close()
			defer cancel()
			err := stream.SendMsg(&basrav1.NewMatchRequest{Seed: []byte("go-held")})
			if err == nil {
				err = stream.CloseSend()
			}
			if err == nil {
				err = stream.RecvMsg(&basrav1.NewMatchResponse{})
			}
			if err != nil {
				t.Errorf("the held call: %v", err)
			}
		})
	}
	t.Cleanup(release)
	return release
}

// waitForReason calls NewMatch through client (no retry policy) until the call is refused
// with reason (want != "") or answered (want == "").
func waitForReason(t *testing.T, client *rules.Client, want string) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for {
		_, err := client.NewMatch(context.Background(), &basrav1.NewMatchRequest{Seed: []byte("go-probe")})
		if err == nil && want == "" || rules.ReasonOf(err) == want && want != "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("still %v after %v, waiting for %q", err, waitLimit, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// attempt is what one attempt of a call ended with, as grpc-go's stats report it.
type attempt struct {
	code   codes.Code
	reason string
}

// attempts records each attempt of the calls of a channel (grpc-go reports every retry
// attempt to the stats handler) and runs onFirst when the first one ends: grpc-go waits for
// it before it schedules the retry.
type attempts struct {
	mu      sync.Mutex
	ended   []attempt
	onFirst func(attempt)
}

// methodKey tags an RPC's context with its method, so that only NewMatch is recorded (the
// channel's health checking runs a Watch stream of its own).
type methodKey struct{}

func (a *attempts) TagRPC(ctx context.Context, info *stats.RPCTagInfo) context.Context {
	return context.WithValue(ctx, methodKey{}, info.FullMethodName)
}
func (a *attempts) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context {
	return ctx
}
func (a *attempts) HandleConn(context.Context, stats.ConnStats) {}

func (a *attempts) HandleRPC(ctx context.Context, s stats.RPCStats) {
	end, ok := s.(*stats.End)
	if !ok || !end.IsClient() || ctx.Value(methodKey{}) != basrav1.RulesService_NewMatch_FullMethodName {
		return
	}
	ended := attempt{code: codes.OK}
	var refusal *rules.Refusal
	if end.Error != nil {
		refusal = rules.RefusalOf(end.Error)
		ended = attempt{code: refusal.Code, reason: refusal.Reason}
	}
	a.mu.Lock()
	a.ended = append(a.ended, ended)
	first := len(a.ended) == 1
	a.mu.Unlock()
	if first && a.onFirst != nil {
		a.onFirst(ended)
	}
}

func TestAShedCallIsRetriedToSuccessByTheServiceConfig(t *testing.T) {
	s := need(t, "shedding")
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the shedding server's log:\n%s", s.log)
		}
	})
	// The same server without the policy: each refusal reaches the caller as it is.
	bare, err := rules.Dial(s.address, rules.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer bare.Close()

	release := holdSlot(t, s.address)
	waitForReason(t, bare, "OVERLOADED") // the held call has the slot: the next is shed

	record := &attempts{onFirst: func(first attempt) {
		// The first attempt was shed; free the slot before the retry goes out.
		release()
		waitForReason(t, bare, "")
	}}
	options := s.options
	options.ServiceConfig = serviceConfig()
	client, err := rules.Dial(s.address, options, grpc.WithStatsHandler(record))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	answer, err := client.NewMatch(context.Background(), &basrav1.NewMatchRequest{Seed: []byte("go-shed")})
	if err != nil {
		t.Fatalf("the shed call was not retried to success: %v (attempts %v)", err, record.ended)
	}
	if answer.GetState().GetStatus() != basrav1.Status_STATUS_IN_PROGRESS {
		t.Fatalf("the retried NewMatch answered %v", answer)
	}
	want := []attempt{{codes.ResourceExhausted, "OVERLOADED"}, {codes.OK, ""}}
	if len(record.ended) != len(want) || record.ended[0] != want[0] || record.ended[1] != want[1] {
		t.Fatalf("attempts %v, want %v", record.ended, want)
	}
}
