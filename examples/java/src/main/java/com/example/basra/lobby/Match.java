package com.example.basra.lobby;

import basra.v1.Rules.Action;
import basra.v1.Rules.ApplyRequest;
import basra.v1.Rules.ApplyResponse;
import basra.v1.Rules.BotLevel;
import basra.v1.Rules.LegalMoves;
import basra.v1.Rules.NewMatchRequest;
import basra.v1.Rules.NewMatchResponse;
import basra.v1.Rules.PlayerView;
import basra.v1.Rules.PlayerViewRequest;
import basra.v1.Rules.ReplayRequest;
import basra.v1.Rules.ReplayResponse;
import basra.v1.Rules.SignedState;
import basra.v1.Rules.State;
import basra.v1.Rules.SuggestMoveRequest;
import com.google.protobuf.ByteString;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;

/**
 * One match as a lobby keeps it: the last answer's state (and its seal, when the service
 * signs states), the actions so far; every move guarded by {@code expected_seq}.
 */
public final class Match {
  /** The last stored answer: the state to read, the signed state to send back (null when the
   *  service does not sign), the legal moves of the seat to move. */
  private record Stored(State state, SignedState signed, LegalMoves legalMoves) {}

  private final RulesClient rules;
  private final ByteString seed;
  private final List<String> labels;
  private final List<Action> actions = new ArrayList<>();
  private Stored stored;

  private Match(RulesClient rules, ByteString seed, List<String> labels, Stored stored) {
    this.rules = rules;
    this.seed = seed;
    this.labels = List.copyOf(labels);
    this.stored = stored;
  }

  /** A new match from {@code seed} (1 to 64 bytes), with the players' display names. */
  public static Match start(RulesClient rules, ByteString seed, List<String> labels) {
    NewMatchRequest request = NewMatchRequest.newBuilder().setSeed(seed).addAllLabels(labels).build();
    NewMatchResponse answer = rules.newMatch(request);
    return new Match(rules, seed, labels, stored(answer.getState(), answer.hasSignedState(),
        answer.getSignedState(), answer.getLegalMoves()));
  }

  private static Stored stored(State state, boolean signs, SignedState signed, LegalMoves moves) {
    return new Stored(state, signs ? signed : null, moves);
  }

  private synchronized Stored current() {
    return stored;
  }

  /** The state as the service last returned it: read it (seq, whose turn, status); it holds
   *  the seed and both hands, so it never goes to a player. */
  public State state() {
    return current().state();
  }

  /** The signed state the service last returned, when it signs states. */
  public Optional<SignedState> signedState() {
    return Optional.ofNullable(current().signed());
  }

  /** The legal moves of the seat to move, as the last answer gave them. */
  public LegalMoves legalMoves() {
    return current().legalMoves();
  }

  /** The actions applied so far, in order. */
  public synchronized List<Action> actions() {
    return List.copyOf(actions);
  }

  /** What {@code seat} may see: its hand and, on its turn, its legal moves. */
  public PlayerView view(int seat) {
    Stored now = current();
    PlayerViewRequest.Builder request = PlayerViewRequest.newBuilder().setSeat(seat);
    // The signed state when the service signs, else the plain one: never a rebuilt state.
    if (now.signed() != null) {
      request.setSignedState(now.signed());
    } else {
      request.setState(now.state());
    }
    return rules.playerView(request.build()).getView();
  }

  /**
   * Apply {@code action}, played on the view whose seq was {@code seq}: the service refuses it
   * (SEQ_MISMATCH) if the match has moved on since, and the answer is stored only over the
   * state the call was made with.
   */
  public ApplyResponse play(Action action, int seq) {
    Stored seen = current();
    ApplyRequest.Builder request = ApplyRequest.newBuilder().setAction(action).setExpectedSeq(seq);
    if (seen.signed() != null) {
      request.setSignedState(seen.signed());
    } else {
      request.setState(seen.state());
    }
    ApplyResponse answer = rules.apply(request.build());
    synchronized (this) {
      // Another action (a second click, the turn timer) was stored while the call was out.
      // With a database: UPDATE ... WHERE id = ? AND seq = ?.
      if (stored != seen) {
        throw new IllegalStateException("Another action was played first.");
      }
      stored = stored(answer.getState(), answer.hasSignedState(), answer.getSignedState(),
          answer.getLegalMoves());
      actions.add(action);
    }
    return answer;
  }

  /** The bot plays {@code seat}: SuggestMove from what that seat may see, then Apply of
   *  exactly the suggested action, with the seq it was suggested for. */
  public ApplyResponse playBot(int seat, BotLevel level) {
    Stored seen = current();
    SuggestMoveRequest.Builder request = SuggestMoveRequest.newBuilder().setSeat(seat).setLevel(level);
    if (seen.signed() != null) {
      request.setSignedState(seen.signed());
    } else {
      request.setState(seen.state());
    }
    Action action = rules.suggestMove(request.build()).getAction();
    return play(action, seen.state().getSeq());
  }

  /** The match played again by the service from its seed, labels and actions (a player's
   *  record of it, docs/determinism.md). */
  public ReplayResponse replay() {
    ReplayRequest.Builder request = ReplayRequest.newBuilder().setSeed(seed).addAllLabels(labels);
    return rules.replay(request.addAllActions(actions()).build());
  }
}
