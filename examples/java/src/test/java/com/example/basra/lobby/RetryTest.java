package com.example.basra.lobby;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import basra.v1.Rules.ApplyRequest;
import basra.v1.Rules.ApplyResponse;
import basra.v1.Rules.NewMatchRequest;
import basra.v1.Rules.NewMatchResponse;
import basra.v1.RulesServiceGrpc;
import io.grpc.CallOptions;
import io.grpc.Channel;
import io.grpc.ClientCall;
import io.grpc.ClientInterceptor;
import io.grpc.ClientStreamTracer;
import io.grpc.Grpc;
import io.grpc.InsecureChannelCredentials;
import io.grpc.ManagedChannel;
import io.grpc.Metadata;
import io.grpc.MethodDescriptor;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;

/**
 * The published retry policy against a server that sheds: a worker that holds one call at most
 * ({@code --admission-limit 1}) refuses the next one OVERLOADED, and the channel's retry,
 * honouring the server's delay, gets it answered once the slot is free.
 *
 * <p>The test holds the slot itself, with no timing: a call whose request it has not sent yet
 * is held by the worker from its admission until its request arrives and is answered.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class RetryTest {
  private static final String SHED_APPLY =
      "basra_refusals_total{grpc_method=\"Apply\",reason=\"OVERLOADED\"}";
  private static final long WAIT_S = 20;
  private RulesServer server;
  private ManagedChannel plain;

  @BeforeAll
  void start() throws Exception {
    server = RulesServer.start(List.of("--admission-limit", "1"), Map.of());
    server.connect(null).close();
    // No service config and no retries: each refusal is seen as the server sent it.
    plain = Grpc.newChannelBuilder(server.target(), InsecureChannelCredentials.create())
        .disableRetry()
        .build();
  }

  @AfterAll
  void stop() throws Exception {
    if (plain != null) {
      plain.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
    }
    if (server != null) {
      server.close();
    }
  }

  @Test
  void aShedCallIsRetriedToSuccessByThePublishedPolicy() throws Exception {
    ApplyRequest request = firstMove();

    // Take the worker's one slot: start an Apply and hold back its request.
    Held held = hold();

    // Once the worker holds it, a call without retries is refused at once, with a delay.
    Refusal shed = null;
    int refused = 0;
    long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(WAIT_S);
    while (shed == null) {
      assertTrue(System.nanoTime() < until, "the server never shed");
      if (held.done().isDone()) {
        // A call of the loop held the slot as the held call came, which was refused: again.
        held = hold();
      }
      try {
        RulesServiceGrpc.newBlockingStub(plain).withDeadlineAfter(5, TimeUnit.SECONDS).apply(request);
        Thread.sleep(20);
      } catch (StatusRuntimeException error) {
        shed = Refusal.of(error);
        refused++;
      }
    }
    assertEquals(Status.Code.RESOURCE_EXHAUSTED, shed.code());
    assertEquals("OVERLOADED", shed.reason());
    assertEquals(Map.of("limit", "1"), shed.metadata());
    Duration delay = shed.retryDelay().orElseThrow();
    assertTrue(delay.compareTo(Duration.ZERO) > 0 && delay.compareTo(Duration.ofSeconds(2)) <= 0,
        delay::toString);

    // The same call with the published policy: its first attempt is shed; the slot is freed
    // once that is seen, and a retry is answered.
    AtomicInteger attempts = new AtomicInteger();
    CompletableFuture<Status> firstAttempt = new CompletableFuture<>();
    try (RulesClient retrying = RulesClient.connect(
        server.target(), RulesServer.SERVICE_CONFIG, null, countAttempts(attempts, firstAttempt))) {
      CompletableFuture<ApplyResponse> answer = CompletableFuture.supplyAsync(() -> retrying.apply(request));
      assertEquals(Status.Code.RESOURCE_EXHAUSTED, firstAttempt.get(WAIT_S, TimeUnit.SECONDS).getCode());
      held.call().sendMessage(request);
      held.call().halfClose();

      assertEquals(1, answer.get(WAIT_S, TimeUnit.SECONDS).getState().getSeq());
      assertTrue(attempts.get() >= 2, () -> attempts.get() + " attempts");
      assertTrue(held.done().get(WAIT_S, TimeUnit.SECONDS).isOk());
    }

    // The server counted the refusals: the ones seen above and the retried call's first.
    double counted = 0;
    until = System.nanoTime() + TimeUnit.SECONDS.toNanos(WAIT_S);
    while (counted < refused + 1 && System.nanoTime() < until) {
      Thread.sleep(200); // a worker writes its counts every second
      counted = server.metric(SHED_APPLY);
    }
    assertTrue(counted >= refused + 1, () -> "the server counted no retried refusal");
  }

  /** An Apply call started without its request, and how it ended. */
  private record Held(ClientCall<ApplyRequest, ApplyResponse> call, CompletableFuture<Status> done) {}

  private Held hold() {
    ClientCall<ApplyRequest, ApplyResponse> call = plain.newCall(RulesServiceGrpc.getApplyMethod(),
        CallOptions.DEFAULT.withDeadlineAfter(WAIT_S * 3, TimeUnit.SECONDS));
    CompletableFuture<Status> done = new CompletableFuture<>();
    call.start(new ClientCall.Listener<>() {
      @Override
      public void onClose(Status status, Metadata trailers) {
        done.complete(status);
      }
    }, new Metadata());
    call.request(1);
    return new Held(call, done);
  }

  private ApplyRequest firstMove() throws Exception {
    try (RulesClient rules = RulesClient.connect(server.target(), RulesServer.SERVICE_CONFIG, null)) {
      NewMatchResponse match = rules.newMatch(
          NewMatchRequest.newBuilder().setSeed(MatchTest.seed("java retry")).build());
      return ApplyRequest.newBuilder()
          .setState(match.getState())
          .setAction(Games.firstMove(match.getState().getToMove(), match.getLegalMoves()))
          .setExpectedSeq(0)
          .build();
    }
  }

  // Every attempt of a call gets a stream tracer of its own: count them, and report how the
  // first one ended.
  private static ClientInterceptor countAttempts(AtomicInteger attempts, CompletableFuture<Status> first) {
    ClientStreamTracer.Factory factory = new ClientStreamTracer.Factory() {
      @Override
      public ClientStreamTracer newClientStreamTracer(ClientStreamTracer.StreamInfo info, Metadata headers) {
        boolean isFirst = attempts.incrementAndGet() == 1;
        return new ClientStreamTracer() {
          @Override
          public void streamClosed(Status status) {
            if (isFirst) {
              first.complete(status);
            }
          }
        };
      }
    };
    return new ClientInterceptor() {
      @Override
      public <Q, A> ClientCall<Q, A> interceptCall(MethodDescriptor<Q, A> method, CallOptions options, Channel next) {
        return next.newCall(method, options.withStreamTracerFactory(factory));
      }
    };
  }
}
