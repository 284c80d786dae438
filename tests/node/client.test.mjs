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
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import readline from 'node:readline';
import { after, before, test } from 'node:test';
import { fileURLToPath } from 'node:url';

import grpc from '@grpc/grpc-js';
import protoLoader from '@grpc/proto-loader';
import protobuf from 'protobufjs';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const REPO = path.resolve(HERE, '..', '..');
const PROTO_ROOT = path.join(REPO, 'proto');
const CALL_DEADLINE_MS = 5000;
const STARTUP_DEADLINE_MS = 30000;
const PLAYS_PER_HAND = 48;

// The gRPC error model and health messages are not part of our .proto files; the few fields
// this test reads are declared here so that nothing else has to be fetched.
const EXTRA_TYPES = protobuf.Root.fromJSON({
  nested: {
    google: {
      nested: {
        protobuf: {
          nested: {
            Any: {
              fields: { type_url: { type: 'string', id: 1 }, value: { type: 'bytes', id: 2 } },
            },
          },
        },
        rpc: {
          nested: {
            Status: {
              fields: {
                code: { type: 'int32', id: 1 },
                message: { type: 'string', id: 2 },
                details: { rule: 'repeated', type: 'google.protobuf.Any', id: 3 },
              },
            },
            ErrorInfo: {
              fields: {
                reason: { type: 'string', id: 1 },
                domain: { type: 'string', id: 2 },
                metadata: { keyType: 'string', type: 'string', id: 3 },
              },
            },
          },
        },
      },
    },
    grpc: {
      nested: {
        health: {
          nested: {
            v1: {
              nested: {
                HealthCheckRequest: { fields: { service: { type: 'string', id: 1 } } },
                HealthCheckResponse: { fields: { status: { type: 'int32', id: 1 } } },
              },
            },
          },
        },
      },
    },
  },
});
const RpcStatus = EXTRA_TYPES.lookupType('google.rpc.Status');
const ErrorInfo = EXTRA_TYPES.lookupType('google.rpc.ErrorInfo');
const HealthCheckRequest = EXTRA_TYPES.lookupType('grpc.health.v1.HealthCheckRequest');
const HealthCheckResponse = EXTRA_TYPES.lookupType('grpc.health.v1.HealthCheckResponse');
const SERVING = 1;

const HealthClient = grpc.makeGenericClientConstructor(
  {
    Check: {
      path: '/grpc.health.v1.Health/Check',
      requestStream: false,
      responseStream: false,
      requestSerialize: (value) => Buffer.from(HealthCheckRequest.encode(value).finish()),
      requestDeserialize: (bytes) => HealthCheckRequest.decode(bytes),
      responseSerialize: (value) => Buffer.from(HealthCheckResponse.encode(value).finish()),
      responseDeserialize: (bytes) => HealthCheckResponse.toObject(HealthCheckResponse.decode(bytes)),
    },
  },
  'Health',
);

function loadRulesService() {
  const dir = path.join(PROTO_ROOT, 'basra', 'v1');
  const files = fs
    .readdirSync(dir)
    .filter((name) => name.endsWith('.proto'))
    .map((name) => path.join('basra', 'v1', name));
  const definition = protoLoader.loadSync(files, {
    includeDirs: [PROTO_ROOT],
    // Field names exactly as in the .proto (snake_case); unset fields stay absent, so a state
    // sent back is byte-for-byte what the server returned (optional seats keep their presence).
    keepCase: true,
    defaults: false,
    arrays: true,
    oneofs: true,
    enums: String,
    longs: Number,
    bytes: Buffer,
  });
  return grpc.loadPackageDefinition(definition).basra.v1.RulesService;
}

function serverCommand() {
  if (process.env.BASRA_RULES_BIN) return process.env.BASRA_RULES_BIN;
  const venv = path.join(REPO, '.venv', 'bin', 'basra-rules');
  return fs.existsSync(venv) ? venv : 'basra-rules';
}

const deadline = (ms = CALL_DEADLINE_MS) => ({ deadline: new Date(Date.now() + ms) });

function unary(client, method, request) {
  return new Promise((resolve, reject) => {
    client[method](request, deadline(), (error, response) =>
      error ? reject(error) : resolve(response),
    );
  });
}

async function startServer() {
  // The server binds a port of its own choosing (--port 0) and names it in its "serving" log
  // line (JSON on standard output), so no other process can take the port in between.
  const child = spawn(
    serverCommand(),
    ['serve', '--host', '127.0.0.1', '--port', '0', '--metrics-port', '0', '--log-format', 'json'],
    { cwd: REPO, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let output = '';
  const keep = (text) => {
    output = (output + text).slice(-4000);
  };
  child.stderr.on('data', (chunk) => keep(chunk.toString()));
  // If this test process dies first, take the server down too (its workers follow it).
  const reap = () => child.kill('SIGKILL');
  process.once('exit', reap);
  child.on('exit', () => process.removeListener('exit', reap));
  const port = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`no "serving" log line within ${STARTUP_DEADLINE_MS} ms:\n${output}`));
    }, STARTUP_DEADLINE_MS);
    readline.createInterface({ input: child.stdout }).on('line', (text) => {
      keep(`${text}\n`);
      let line;
      try {
        line = JSON.parse(text);
      } catch {
        return;
      }
      if (line.event === 'serving') {
        clearTimeout(timer);
        resolve(line.port);
      }
    });
    child.on('exit', (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`[${serverCommand()} exited: code ${code}, signal ${signal}]\n${output}`));
    });
    child.on('error', (error) => {
      clearTimeout(timer);
      reject(new Error(`cannot run ${serverCommand()}: ${error.message}`));
    });
  });
  const address = `127.0.0.1:${port}`;
  // What a kubelet or a gateway would ask first: the rules service reports SERVING.
  const health = new HealthClient(address, grpc.credentials.createInsecure());
  try {
    const status = await new Promise((resolve, reject) => {
      health.Check({ service: 'basra.v1.RulesService' }, deadline(), (error, reply) =>
        error ? reject(error) : resolve(reply.status),
      );
    });
    assert.equal(status, SERVING);
  } finally {
    health.close();
  }
  return { child, address };
}

function stopServer(child) {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) {
      resolve();
      return;
    }
    const force = setTimeout(() => child.kill('SIGKILL'), 15000);
    child.on('exit', () => {
      clearTimeout(force);
      resolve();
    });
    child.kill('SIGTERM');
  });
}

function errorInfoOf(error) {
  const [raw] = error.metadata.get('grpc-status-details-bin');
  assert.ok(raw, 'the refusal carries grpc-status-details-bin metadata');
  const status = RpcStatus.decode(raw);
  assert.equal(status.code, error.code, 'the rich status repeats the call status code');
  assert.equal(status.details.length, 1, 'exactly one detail');
  const [detail] = status.details;
  assert.equal(detail.type_url, 'type.googleapis.com/google.rpc.ErrorInfo');
  return ErrorInfo.toObject(ErrorInfo.decode(detail.value));
}

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
