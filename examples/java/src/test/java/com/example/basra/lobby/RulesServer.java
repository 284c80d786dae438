package com.example.basra.lobby;

import com.google.gson.JsonObject;
import com.google.gson.JsonParser;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/**
 * A real {@code basra-rules serve}, started by a test on a loopback port it picks itself and
 * stopped at the end. The command is {@code -Dbasra.rules=...} or {@code BASRA_RULES}, else the
 * repository's {@code .venv/bin/basra-rules} (set up by {@code bash .ci/setup dev}).
 */
final class RulesServer implements AutoCloseable {
  /** This project's folder is examples/java: the repository is two levels up. */
  static final Path REPO = Path.of("..", "..");
  static final Path SERVICE_CONFIG = REPO.resolve(Path.of("deploy", "grpc-service-config.json"));
  private static final Duration START = Duration.ofSeconds(60);
  private static final Duration STOP = Duration.ofSeconds(15);

  private final Process process;
  final int port;
  final int metricsPort;

  private RulesServer(Process process, int port, int metricsPort) {
    this.process = process;
    this.port = port;
    this.metricsPort = metricsPort;
  }

  static Path command() {
    String named = System.getProperty("basra.rules", System.getenv("BASRA_RULES"));
    Path command = named == null || named.isEmpty()
        ? REPO.resolve(Path.of(".venv", "bin", "basra-rules"))
        : Path.of(named);
    if (!Files.isExecutable(command)) {
      throw new IllegalStateException(command.toAbsolutePath().normalize()
          + " is not executable: run `bash .ci/setup dev` at the repository root, or name the"
          + " server with -Dbasra.rules=PATH or BASRA_RULES");
    }
    return command;
  }

  /** Start a server with these extra flags and variables; return once it logs "serving". */
  static RulesServer start(List<String> flags, Map<String, String> env) throws Exception {
    int metricsPort = freePort();
    List<String> argv = new ArrayList<>(List.of(command().toString(), "serve",
        "--host", "127.0.0.1", "--port", "0", "--metrics-port", String.valueOf(metricsPort),
        "--workers", "1", "--log-format", "json", "--grace-seconds", "1"));
    argv.addAll(flags);
    ProcessBuilder builder = new ProcessBuilder(argv).redirectErrorStream(true);
    builder.environment().putAll(env);
    Process process = builder.start();
    // If the test JVM dies first, the server goes with it.
    Thread reaper = new Thread(() -> stop(process));
    Runtime.getRuntime().addShutdownHook(reaper);
    process.onExit().thenRun(() -> {
      try {
        Runtime.getRuntime().removeShutdownHook(reaper);
      } catch (IllegalStateException shuttingDown) {
        // The hook is running already.
      }
    });
    CompletableFuture<Integer> serving = new CompletableFuture<>();
    Deque<String> lines = new ArrayDeque<>();
    Thread reader = new Thread(() -> read(process, lines, serving), "basra-rules output");
    reader.setDaemon(true);
    reader.start();
    try {
      return new RulesServer(process, serving.get(START.toSeconds(), TimeUnit.SECONDS), metricsPort);
    } catch (TimeoutException | ExecutionException error) {
      stop(process);
      synchronized (lines) {
        throw new IllegalStateException("basra-rules serve did not start within " + START
            + ":\n" + String.join("\n", lines), error);
      }
    }
  }

  // The server's JSON log lines: the "serving" line names the port it bound.
  private static void read(Process process, Deque<String> lines, CompletableFuture<Integer> serving) {
    try (BufferedReader reader = new BufferedReader(
        new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8))) {
      for (String line; (line = reader.readLine()) != null; ) {
        synchronized (lines) {
          lines.addLast(line);
          if (lines.size() > 50) {
            lines.removeFirst();
          }
        }
        if (!serving.isDone() && line.startsWith("{")) {
          JsonObject event = JsonParser.parseString(line).getAsJsonObject();
          if (event.has("event") && event.get("event").getAsString().equals("serving")) {
            serving.complete(event.get("port").getAsInt());
          }
        }
      }
      serving.completeExceptionally(new IllegalStateException("exited " + process.waitFor()));
    } catch (IOException | InterruptedException | RuntimeException error) {
      serving.completeExceptionally(error);
    }
  }

  private static int freePort() throws IOException {
    try (ServerSocket socket = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
      return socket.getLocalPort();
    }
  }

  String target() {
    return "127.0.0.1:" + port;
  }

  /** A client of this server with the published retry policy; returns once health says
   *  SERVING (a server reports NOT_SERVING until it has started). */
  RulesClient connect(RulesClient.Tls tls) throws Exception {
    RulesClient client = RulesClient.connect(target(), SERVICE_CONFIG, tls);
    long until = System.nanoTime() + START.toNanos();
    while (true) {
      try {
        if (client.serving()) {
          return client;
        }
      } catch (Refusal notYet) {
        if (System.nanoTime() > until) {
          client.close();
          throw notYet;
        }
      }
      if (System.nanoTime() > until) {
        client.close();
        throw new IllegalStateException("health never reported SERVING");
      }
      Thread.sleep(100);
    }
  }

  /** The value of one Prometheus sample on the metrics port ("name{labels}"), or 0. */
  double metric(String sample) throws IOException, InterruptedException {
    HttpRequest request = HttpRequest.newBuilder(
        URI.create("http://127.0.0.1:" + metricsPort + "/metrics")).timeout(Duration.ofSeconds(5)).build();
    String text = HttpClient.newHttpClient().send(request, HttpResponse.BodyHandlers.ofString()).body();
    for (String line : text.split("\n")) {
      if (line.startsWith(sample + " ")) {
        return Double.parseDouble(line.substring(sample.length() + 1).trim());
      }
    }
    return 0;
  }

  @Override
  public void close() {
    stop(process);
  }

  /** Closes, in order, each of a test class's resources that its set-up made (nulls skipped). */
  static void closeAll(AutoCloseable... resources) throws Exception {
    for (AutoCloseable resource : resources) {
      if (resource != null) {
        resource.close();
      }
    }
  }

  // SIGTERM (the server drains within --grace-seconds), then SIGKILL; its workers stop by
  // themselves when it is gone.
  private static void stop(Process process) {
    process.destroy();
    try {
      if (!process.waitFor(STOP.toSeconds(), TimeUnit.SECONDS)) {
        process.destroyForcibly().waitFor(STOP.toSeconds(), TimeUnit.SECONDS);
      }
    } catch (InterruptedException interrupted) {
      process.destroyForcibly();
      Thread.currentThread().interrupt();
    }
  }
}
