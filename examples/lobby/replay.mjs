// A match record (`basra-rules play --record`, docs/determinism.md) played again through the
// rules service, one step per action, for the replay page. The record holds the seed, so the
// match is over and nothing is secret any more: each step shows both hands.

const MAX_ACTIONS = 2000;

// The record uses the protobuf JSON mapping (lowerCamelCase); the client loaded the .proto
// with its own field names (snake_case).
function actionOf(recorded) {
  const action = { seat: recorded.seat ?? 0, card: recorded.card };
  if (recorded.planId !== undefined) action.plan_id = recorded.planId;
  if (recorded.capture !== undefined) action.capture = { cards: recorded.capture.cards ?? [] };
  if (recorded.trail !== undefined) action.trail = recorded.trail;
  return action;
}

// What the replay page draws of a state: everything but the deck order and the seed.
function table(state) {
  return {
    seq: state.seq ?? 0,
    hand_number: state.hand_number,
    dealer: state.dealer ?? 0,
    to_move: state.to_move,
    status: state.status,
    winner: state.winner,
    carry: state.carry ?? 0,
    floor: state.floor,
    deck_size: state.deck.length,
    unclaimed: state.unclaimed,
    seats: state.seats.map((seat) => ({
      label: seat.label ?? '',
      hand: seat.hand,
      captured_count: seat.captured.length,
      basras: seat.basras ?? 0,
      total: seat.total ?? 0,
    })),
  };
}

/** Replay `record`: a step for the deal and one per action, each with its events and table. */
export async function replay(rules, record) {
  if (typeof record?.seed !== 'string' || !Array.isArray(record.actions)) {
    throw Object.assign(new Error('a record needs its "seed" (base64) and its "actions"'), { status: 400 });
  }
  if (record.actions.length > MAX_ACTIONS) {
    throw Object.assign(new Error(`at most ${MAX_ACTIONS} actions`), { status: 400 });
  }
  const seed = Buffer.from(record.seed, 'base64');
  let answer = await rules.newMatch({ seed });
  const commitment = answer.seed_commitment.toString('base64');
  const steps = [{ seq: 0, action: null, events: answer.events, table: table(answer.state) }];
  let refusal = null;
  for (const recorded of record.actions) {
    const action = actionOf(recorded);
    const { state, signed_state: signed } = answer;
    try {
      answer = await rules.apply({ ...(signed ? { signed_state: signed } : { state }), action, expected_seq: state.seq ?? 0 });
    } catch (error) {
      refusal = { index: steps.length - 1, action, reason: error.reason, message: error.message };
      break;
    }
    steps.push({ seq: answer.state.seq, action, events: answer.events, table: table(answer.state) });
  }
  return {
    commitment,
    commitmentMatches: record.seedCommitment === undefined || record.seedCommitment === commitment,
    steps,
    refusal,
  };
}
