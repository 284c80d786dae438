package com.example.basra.lobby;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import basra.v1.Rules.Action;
import basra.v1.Rules.ApplyResponse;
import basra.v1.Rules.BotLevel;
import basra.v1.Rules.LegalMoves;
import basra.v1.Rules.Move;
import basra.v1.Rules.PlayerView;
import basra.v1.Rules.ReplayResponse;
import basra.v1.Rules.State;
import basra.v1.Rules.Status;
import com.google.protobuf.ByteString;
import com.google.protobuf.InvalidProtocolBufferException;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.List;

/** Whole matches as the tests play them: a person at seat 0, the bot at seat 1. */
final class Games {
  static final int PERSON = 0;
  static final int BOT = 1;
  // A match is a few hands of 48 plays; more than this means it never ends.
  private static final int MOST_PLAYS = 48 * 30;

  private Games() {}

  /** The person's move from their own view: the first card of the hand, its first plan if
   *  it captures (else it trails). */
  static Action firstMove(PlayerView view) {
    return firstMove(view.getSeat(), view.getLegalMoves());
  }

  /** The first card of {@code moves}, played by {@code seat}. */
  static Action firstMove(int seat, LegalMoves moves) {
    Move move = moves.getMoves(0);
    Action.Builder action = Action.newBuilder().setSeat(seat).setCard(move.getCard());
    if (!move.getTrails()) {
      action.setPlanId(move.getPlans(0).getId());
    }
    return action.build();
  }

  /**
   * Play a match from {@code seed} to its end against the bot at {@code level}, checking every
   * answer (the next seq; a signed state exactly when {@code signs}, sealing the plain state's
   * bytes), the seed against its commitment at the end, and the match against its Replay.
   */
  static Match playToTheEnd(RulesClient rules, ByteString seed, BotLevel level, boolean signs)
      throws InvalidProtocolBufferException, NoSuchAlgorithmException {
    Match match = Match.start(rules, seed, List.of("person", "bot"));
    assertEquals(signs, match.signedState().isPresent());
    ByteString commitment = match.view(PERSON).getSeedCommitment();
    assertEquals(sha256(seed), commitment);
    for (int plays = 0; match.state().getStatus() == Status.STATUS_IN_PROGRESS; plays++) {
      assertTrue(plays < MOST_PLAYS, "the match never ended");
      int seq = match.state().getSeq();
      ApplyResponse answer;
      if (match.state().getToMove() == BOT) {
        answer = match.playBot(BOT, level);
      } else {
        PlayerView view = match.view(PERSON);
        assertEquals(seq, view.getSeq());
        answer = match.play(firstMove(view), view.getSeq());
      }
      assertEquals(seq + 1, answer.getState().getSeq());
      assertEquals(signs, answer.hasSignedState());
      if (signs) {
        assertEquals(answer.getState(), State.parseFrom(answer.getSignedState().getState()));
      }
    }
    State end = match.state();
    assertTrue(end.hasWinner());
    assertFalse(end.hasToMove());
    PlayerView last = match.view(PERSON);
    assertEquals(seed, last.getSeed(), "the seed is revealed at the end");
    assertEquals(commitment, last.getSeedCommitment());

    ReplayResponse replay = match.replay();
    assertFalse(replay.hasRefusedIndex(), () -> "Replay refused: " + replay.getRefusal());
    assertEquals(end.getWinner(), replay.getState().getWinner());
    assertEquals(end, replay.getState());
    return match;
  }

  static ByteString sha256(ByteString bytes) throws NoSuchAlgorithmException {
    return ByteString.copyFrom(MessageDigest.getInstance("SHA-256").digest(bytes.toByteArray()));
  }
}
