package com.example.basra.lobby;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import basra.v1.Rules.ApplyRequest;
import basra.v1.Rules.BotLevel;
import basra.v1.Rules.SignedState;
import basra.v1.Rules.State;
import io.grpc.Status;
import java.security.SecureRandom;
import java.util.Base64;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;

/** Matches against a server that signs its states: every state goes back as it came. */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class SignedStatesTest {
  private static final String KEY_ID = "java-test";
  private RulesServer server;
  private RulesClient rules;

  @BeforeAll
  void start() throws Exception {
    byte[] key = new byte[32];
    new SecureRandom().nextBytes(key);
    // The keys go in the variable, not a flag: flags show in process lists.
    String keys = KEY_ID + ":" + Base64.getEncoder().encodeToString(key);
    server = RulesServer.start(List.of(), Map.of("BASRA_SIGNING_KEYS", keys));
    rules = server.connect(null);
  }

  @AfterAll
  void stop() throws Exception {
    RulesServer.closeAll(rules, server);
  }

  @Test
  void aWholeMatchCarriesEverySignedStateBackUnchanged() throws Exception {
    Match match = Games.playToTheEnd(rules, MatchTest.seed("java signed match"),
        BotLevel.BOT_LEVEL_GREEDY, true);
    assertEquals(KEY_ID, match.signedState().orElseThrow().getKeyId());
  }

  @Test
  void aTamperedSignedStateIsRefusedWithBadSignature() throws Exception {
    Match match = Match.start(rules, MatchTest.seed("java tampered"), List.of());
    SignedState signed = match.signedState().orElseThrow();
    State state = State.parseFrom(signed.getState());
    int seat = state.getToMove();
    // The seat to move gives itself ten more points, keeping the seal of the true state.
    State.Builder richer = state.toBuilder();
    richer.getSeatsBuilder(seat).setTotal(state.getSeats(seat).getTotal() + 10);
    SignedState tampered = signed.toBuilder().setState(richer.build().toByteString()).build();
    ApplyRequest request = ApplyRequest.newBuilder()
        .setSignedState(tampered)
        .setAction(Games.firstMove(match.view(seat)))
        .setExpectedSeq(0)
        .build();

    Refusal refusal = assertThrows(Refusal.class, () -> rules.apply(request));

    assertEquals(Status.Code.UNAUTHENTICATED, refusal.code());
    assertEquals("BAD_SIGNATURE", refusal.reason());
    assertEquals(Map.of("keyId", KEY_ID), refusal.metadata());
    // The untouched state is still good.
    assertEquals(1, rules.apply(request.toBuilder().setSignedState(signed).build()).getState().getSeq());
  }

  @Test
  void aPlainStateIsRefusedWithBadSignature() {
    Match match = Match.start(rules, MatchTest.seed("java plain state"), List.of());
    int seat = match.state().getToMove();
    ApplyRequest request = ApplyRequest.newBuilder()
        .setState(match.state())
        .setAction(Games.firstMove(match.view(seat)))
        .build();

    Refusal refusal = assertThrows(Refusal.class, () -> rules.apply(request));

    assertEquals("BAD_SIGNATURE", refusal.reason());
    assertTrue(refusal.metadata().containsKey("field"), refusal.metadata()::toString);
  }
}
