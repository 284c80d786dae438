package com.example.basra.lobby;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import basra.v1.Rules.Action;
import basra.v1.Rules.BotLevel;
import basra.v1.Rules.PlayerView;
import basra.v1.Rules.State;
import com.google.protobuf.ByteString;
import io.grpc.Status;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.io.TempDir;

/** Matches against a server that does not sign states. */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class MatchTest {
  private RulesServer server;
  private RulesClient rules;

  @BeforeAll
  void start() throws Exception {
    server = RulesServer.start(List.of(), Map.of());
    rules = server.connect(null);
  }

  @AfterAll
  void stop() throws Exception {
    RulesServer.closeAll(rules, server);
  }

  @Test
  void aWholeMatchAgainstTheBotEndsWithTheWinnerItsReplayGives() throws Exception {
    Match match = Games.playToTheEnd(rules, seed("java whole match"), BotLevel.BOT_LEVEL_STRONG, false);
    assertTrue(match.actions().size() >= 48, "at least one whole hand");
  }

  @Test
  void aMoveMadeOnAStaleViewIsRefusedWithSeqMismatchAndChangesNothing() {
    Match match = Match.start(rules, seed("java stale view"), List.of());
    int seat = match.state().getToMove();
    PlayerView seen = match.view(seat);
    Action move = Games.firstMove(seen);
    match.play(move, seen.getSeq());
    State now = match.state();

    // The same click, sent again on the view it was made on.
    Refusal refusal = assertThrows(Refusal.class, () -> match.play(move, seen.getSeq()));

    assertEquals(Status.Code.ABORTED, refusal.code());
    assertEquals("SEQ_MISMATCH", refusal.reason());
    assertEquals(Map.of("seq", "1", "expectedSeq", "0"), refusal.metadata());
    assertEquals(now, match.state());
    assertEquals(1, match.actions().size());
  }

  @Test
  void anInvalidServiceConfigFailsWhenTheChannelIsBuilt(@TempDir Path dir) throws Exception {
    Path broken = dir.resolve("grpc-service-config.json");
    String published = Files.readString(RulesServer.SERVICE_CONFIG, StandardCharsets.UTF_8);
    Files.writeString(broken, published.replace("\"maxAttempts\": 4", "\"maxAttempts\": \"four\""));

    assertThrows(RuntimeException.class, () -> RulesClient.connect(server.target(), broken, null).close());
  }

  static ByteString seed(String text) {
    return ByteString.copyFrom(text, StandardCharsets.UTF_8);
  }
}
