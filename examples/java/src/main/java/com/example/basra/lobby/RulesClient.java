package com.example.basra.lobby;

import basra.v1.Rules.ApplyRequest;
import basra.v1.Rules.ApplyResponse;
import basra.v1.Rules.LegalMovesRequest;
import basra.v1.Rules.LegalMovesResponse;
import basra.v1.Rules.NewMatchRequest;
import basra.v1.Rules.NewMatchResponse;
import basra.v1.Rules.PlayerViewRequest;
import basra.v1.Rules.PlayerViewResponse;
import basra.v1.Rules.ReplayRequest;
import basra.v1.Rules.ReplayResponse;
import basra.v1.Rules.SuggestMoveRequest;
import basra.v1.Rules.SuggestMoveResponse;
import basra.v1.RulesServiceGrpc;
import basra.v1.RulesServiceGrpc.RulesServiceBlockingStub;
import com.google.gson.Gson;
import io.grpc.ChannelCredentials;
import io.grpc.ClientInterceptor;
import io.grpc.Grpc;
import io.grpc.InsecureChannelCredentials;
import io.grpc.ManagedChannel;
import io.grpc.StatusRuntimeException;
import io.grpc.TlsChannelCredentials;
import io.grpc.health.v1.HealthCheckRequest;
import io.grpc.health.v1.HealthCheckResponse.ServingStatus;
import io.grpc.health.v1.HealthGrpc;
import io.grpc.stub.AbstractStub;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.function.Function;

/**
 * The rules service as a Java lobby calls it: one channel with the published retry policy and
 * keepalive, a deadline on every call, and refusals thrown as {@link Refusal} with their reason
 * code.
 */
public final class RulesClient implements AutoCloseable {
  /** The service a health check asks about. */
  public static final String SERVICE = "basra.v1.RulesService";

  /** Each call's deadline, retries included: every RPC answers in well under a second. */
  static final long CALL_DEADLINE_MS = 10_000;

  /**
   * The published client keepalive (docs/integration.md, "Client settings"): a connection that
   * has read nothing for 10 s (the least grpc-java allows) is pinged, and dropped when no answer
   * comes within 1 s; with Netty's epoll transport, grpc-java also sets the socket's
   * TCP_USER_TIMEOUT to the timeout, so a connection whose sent data goes unacknowledged for
   * 1 s is dropped too. Without it a server lost without a reset keeps its share of the calls
   * for as long as Linux keeps the connection (about 15 minutes).
   */
  static final long KEEPALIVE_TIME_MS = 10_000;

  static final long KEEPALIVE_TIMEOUT_MS = 1_000;

  private final ManagedChannel channel;
  private final RulesServiceBlockingStub rules;
  private final HealthGrpc.HealthBlockingStub health;

  private RulesClient(ManagedChannel channel) {
    this.channel = channel;
    this.rules = RulesServiceGrpc.newBlockingStub(channel);
    this.health = HealthGrpc.newBlockingStub(channel);
  }

  /** TLS settings: the CA that signed the server's certificate, and this client's own
   *  certificate and key for a server that requires one (mutual TLS), else null. */
  public record Tls(Path ca, Path cert, Path key) {}

  /**
   * A client of the service at {@code target} ("host:port"), with the service config file
   * {@code serviceConfig} (deploy/grpc-service-config.json); plaintext when {@code tls} is null.
   */
  public static RulesClient connect(
      String target, Path serviceConfig, Tls tls, ClientInterceptor... interceptors)
      throws IOException {
    ManagedChannel channel =
        Grpc.newChannelBuilder(target, credentials(tls))
            .defaultServiceConfig(serviceConfig(serviceConfig))
            .enableRetry()
            .keepAliveTime(KEEPALIVE_TIME_MS, TimeUnit.MILLISECONDS)
            .keepAliveTimeout(KEEPALIVE_TIMEOUT_MS, TimeUnit.MILLISECONDS)
            .keepAliveWithoutCalls(true)
            .intercept(interceptors)
            .build();
    return new RulesClient(channel);
  }

  /** The service config file as the map grpc-java takes: read whole, never copied by hand. */
  static Map<String, ?> serviceConfig(Path file) throws IOException {
    // Gson reads objects as maps, arrays as lists and numbers as doubles, the types
    // defaultServiceConfig accepts; the channel refuses an invalid policy when it is built.
    Object config = new Gson().fromJson(Files.readString(file, StandardCharsets.UTF_8), Object.class);
    if (!(config instanceof Map<?, ?>)) {
      throw new IllegalArgumentException(file + " holds no JSON object");
    }
    @SuppressWarnings("unchecked")
    Map<String, ?> map = (Map<String, ?>) config;
    return map;
  }

  private static ChannelCredentials credentials(Tls tls) throws IOException {
    if (tls == null) {
      return InsecureChannelCredentials.create();
    }
    TlsChannelCredentials.Builder builder = TlsChannelCredentials.newBuilder();
    builder.trustManager(tls.ca().toFile());
    if (tls.cert() != null) {
      builder.keyManager(tls.cert().toFile(), tls.key().toFile());
    }
    return builder.build();
  }

  /** Whether the rules service reports SERVING (what a readiness check asks). */
  public boolean serving() {
    HealthCheckRequest request = HealthCheckRequest.newBuilder().setService(SERVICE).build();
    return call(health, stub -> stub.check(request)).getStatus() == ServingStatus.SERVING;
  }

  public NewMatchResponse newMatch(NewMatchRequest request) {
    return call(rules, stub -> stub.newMatch(request));
  }

  public ApplyResponse apply(ApplyRequest request) {
    return call(rules, stub -> stub.apply(request));
  }

  public LegalMovesResponse legalMoves(LegalMovesRequest request) {
    return call(rules, stub -> stub.legalMoves(request));
  }

  public PlayerViewResponse playerView(PlayerViewRequest request) {
    return call(rules, stub -> stub.playerView(request));
  }

  public SuggestMoveResponse suggestMove(SuggestMoveRequest request) {
    return call(rules, stub -> stub.suggestMove(request));
  }

  public ReplayResponse replay(ReplayRequest request) {
    return call(rules, stub -> stub.replay(request));
  }

  // A fresh deadline for each call (a stub's deadline is fixed when the stub is made); a
  // refusal comes back as a Refusal with its reason code.
  private static <S extends AbstractStub<S>, R> R call(S stub, Function<S, R> rpc) {
    try {
      return rpc.apply(stub.withDeadlineAfter(CALL_DEADLINE_MS, TimeUnit.MILLISECONDS));
    } catch (StatusRuntimeException error) {
      throw Refusal.of(error);
    }
  }

  @Override
  public void close() throws InterruptedException {
    channel.shutdown();
    if (!channel.awaitTermination(5, TimeUnit.SECONDS)) {
      channel.shutdownNow();
    }
  }
}
