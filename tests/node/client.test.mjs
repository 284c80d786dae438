// A real non-Python client of basra.v1.RulesService (@grpc/grpc-js + @grpc/proto-loader).
//
// The test starts the server itself as a child process on a loopback port the server chooses
// (read from its "serving" log line), checks that its health reports SERVING, plays one whole
// hand (48 plays) from the legal moves the server returns, checks how refusals are reported,
// plays a few moves suggested by SuggestMove at each bot level, and stops the server at the
// end.
//
// Run from this folder: `npm ci && node --test`. The server command is
// <repo>/.venv/bin/basra-rules unless BASRA_RULES_BIN names another executable.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import grpc from '@grpc/grpc-js';

import {
  errorInfoOf,
  loadRulesService,
  startServer,
  stopServer,
  unary,
} from './rules-server.mjs';

const PLAYS_PER_HAND = 48;

// Which of the three ways an action may name its capture is used, in turn, so that one hand
// exercises all of them: by plan id, by the explicit capture set, and by giving no choice.
function chooseAction(legal, turn, used) {
  const moves = legal.moves;
  assert.ok(moves.length > 0, 'the seat to move has cards');
  const move = moves[turn % moves.length];
  const action = { seat: legal.seat, card: move.card };
  const plans = move.plans ?? [];
  if (move.trails) {
    assert.equal(plans.length, 0, 'a trailing card has no plan');
    if (turn % 3 === 1) {
      action.trail = true;
      used.trail += 1;
    } else {
      used.noChoice += 1;
    }
    return action;
  }
  assert.ok(plans.length > 0, 'a card that does not trail has plans');
  const plan = plans[turn % plans.length];
  const way = plans.length === 1 ? turn % 3 : turn % 2;
  if (way === 0) {
    action.plan_id = plan.id;
    used.planId += 1;
  } else if (way === 1) {
    // Any order names the same set: send the cards reversed.
    action.capture = { cards: [...plan.cards].reverse() };
    used.capture += 1;
  } else {
    used.noChoice += 1;
  }
  return action;
}

let server;
let rules;

before(async () => {
  server = await startServer();
  const RulesService = loadRulesService();
  rules = new RulesService(server.address, grpc.credentials.createInsecure());
});

after(async () => {
  rules?.close();
  if (server) await stopServer(server.child);
});

test('plays a whole hand from the legal moves the server returns', async () => {
  const seed = Buffer.from('node-client-hand');
  let result = await unary(rules, 'NewMatch', { seed, labels: ['node-a', 'node-b'] });
  assert.equal(result.state.seq ?? 0, 0);
  assert.equal(result.state.hand_number, 1);
  assert.deepEqual(
    result.state.seats.map((seat) => seat.label),
    ['node-a', 'node-b'],
  );
  assert.equal(result.seat_events.length, 2);
  assert.equal(result.events[0].kind, 'hand_started');

  const used = { planId: 0, capture: 0, noChoice: 0, trail: 0 };
  let plays = 0;
  let handScored = null;
  while (handScored === null) {
    assert.ok(plays < PLAYS_PER_HAND, 'the hand is scored by the 48th play');
    const { state, legal_moves: legal } = result;
    assert.equal(legal.seat, state.to_move, 'legal moves are for the seat to move');
    assert.equal(legal.moves.length, state.seats[legal.seat].hand.length);

    const listed = await unary(rules, 'LegalMoves', { state });
    assert.deepEqual(listed.legal_moves, legal, 'LegalMoves agrees with the returned moves');

    const action = chooseAction(legal, plays, used);
    const request = { state, action };
    if (plays % 2 === 0) request.expected_seq = state.seq ?? 0;
    result = await unary(rules, 'Apply', request);
    plays += 1;

    assert.equal(result.state.seq, (state.seq ?? 0) + 1, 'each play adds one to seq');
    const [played] = result.events;
    assert.equal(played.kind, 'card_played');
    assert.equal(played.card_played.card, action.card);
    assert.equal(played.card_played.seat ?? 0, action.seat);
    assert.ok(
      !result.state.seats[action.seat].hand.includes(action.card) ||
        result.events.some((event) => event.kind === 'hand_started'),
      'the played card left the hand',
    );
    for (const [index, seen] of result.seat_events.entries()) {
      assert.equal(seen.seat ?? 0, index);
      assert.equal(seen.events.length, result.events.length);
      for (const event of seen.events) {
        if (event.kind === 'cards_dealt' && event.cards_dealt.seat !== undefined) {
          assert.equal(event.cards_dealt.seat, index, "no seat sees the other seat's deal");
        }
      }
    }
    const scored = result.events.find((event) => event.kind === 'hand_scored');
    if (scored) handScored = scored.hand_scored;
  }

  assert.equal(plays, PLAYS_PER_HAND, 'a hand is 48 plays');
  assert.equal(handScored.hand_number, 1);
  assert.equal(handScored.seats.length, 2);
  const cards = handScored.seats.reduce((sum, seat) => sum + (seat.cards ?? 0), 0);
  assert.ok(cards <= 52, 'no more than the deck is scored');
  assert.ok(used.planId > 0, 'some plays chose a plan by id');
  assert.ok(used.capture > 0, 'some plays named the capture explicitly');
  assert.ok(used.noChoice > 0, 'some plays gave no choice');
});

test('a refusal carries one google.rpc.ErrorInfo detail with its reason', async () => {
  const { state, legal_moves: legal } = await unary(rules, 'NewMatch', {
    seed: Buffer.from('node-client-refusal'),
  });
  const other = 1 - legal.seat;
  const card = state.seats[other].hand[0];

  await assert.rejects(
    unary(rules, 'Apply', { state, action: { seat: other, card } }),
    (error) => {
      assert.equal(error.code, grpc.status.FAILED_PRECONDITION);
      const info = errorInfoOf(error);
      assert.equal(info.reason, 'NOT_YOUR_TURN');
      assert.equal(info.domain, 'basra.v1');
      assert.ok(Object.keys(info.metadata ?? {}).length > 0, 'metadata names the values');
      return true;
    },
  );

  const move = legal.moves[0];
  await assert.rejects(
    unary(rules, 'Apply', {
      state,
      action: { seat: legal.seat, card: move.card, trail: move.trails || undefined },
      expected_seq: 7,
    }),
    (error) => {
      assert.equal(error.code, grpc.status.ABORTED);
      assert.equal(errorInfoOf(error).reason, 'SEQ_MISMATCH');
      return true;
    },
  );

  await assert.rejects(
    unary(rules, 'Apply', { state, action: { seat: legal.seat, card: 'ZZ' } }),
    (error) => {
      assert.equal(error.code, grpc.status.INVALID_ARGUMENT);
      assert.ok(errorInfoOf(error).reason.length > 0, 'the reason is named');
      return true;
    },
  );
});

test('SuggestMove gives an action Apply takes, at every level, and refuses like the others', async () => {
  let result = await unary(rules, 'NewMatch', { seed: Buffer.from('node-client-bot') });
  const levels = ['BOT_LEVEL_RANDOM', 'BOT_LEVEL_GREEDY', 'BOT_LEVEL_STRONG'];
  // A few plays, each level in turn: the suggested action goes to Apply unchanged.
  for (let turn = 0; turn < 9; turn += 1) {
    const { state } = result;
    const level = levels[turn % levels.length];
    const suggestion = await unary(rules, 'SuggestMove', { state, seat: state.to_move, level });
    assert.equal(suggestion.level, level);
    assert.equal(suggestion.action.seat ?? 0, state.to_move ?? 0);
    assert.ok(state.seats[state.to_move ?? 0].hand.includes(suggestion.action.card));
    assert.deepEqual(suggestion.candidates[0].action, suggestion.action, 'best first');
    assert.ok(suggestion.reason.length > 0, 'a reason code is given');
    if (level === 'BOT_LEVEL_STRONG' && suggestion.reason !== 'ONLY_MOVE') {
      assert.ok(suggestion.work.deals > 0 && suggestion.work.nodes > 0, 'the work is reported');
    }
    result = await unary(rules, 'Apply', { state, action: suggestion.action });
    assert.equal(result.state.seq, (state.seq ?? 0) + 1);
  }

  const { state } = result;
  const other = 1 - (state.to_move ?? 0);
  await assert.rejects(unary(rules, 'SuggestMove', { state, seat: other }), (error) => {
    assert.equal(error.code, grpc.status.FAILED_PRECONDITION);
    assert.equal(errorInfoOf(error).reason, 'NOT_YOUR_TURN');
    return true;
  });
  await assert.rejects(
    unary(rules, 'SuggestMove', { state, seat: state.to_move, budget: { deals: 1000000 } }),
    (error) => {
      assert.equal(error.code, grpc.status.RESOURCE_EXHAUSTED);
      assert.equal(errorInfoOf(error).reason, 'BUDGET_TOO_LARGE');
      return true;
    },
  );
});
