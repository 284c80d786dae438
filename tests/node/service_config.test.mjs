// deploy/grpc-service-config.json loaded whole by one grpc-js channel over two servers: the
// channel accepts it, spreads calls over both servers (round_robin) and retries a call that
// one of them sheds (OVERLOADED) on the other. grpc-js does not implement client-side health
// checking (healthCheckConfig is ignored), so it has no test here of skipping a NOT_SERVING
// server; grpcio does (tests/service/test_service_client_config.py).
//
// Run from this folder: `npm ci && npm test`.

import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';

import grpc from '@grpc/grpc-js';

import { REPO, loadRulesService, startServer, stopServer, unary } from './rules-server.mjs';

const SERVICE_CONFIG = path.join(REPO, 'deploy', 'grpc-service-config.json');
// A suggestion that takes about half a second of CPU or more (as tests/service's shutdown test
// uses): it holds the only place of a server whose bound is one call.
const LONG_BUDGET = { deals: 4000, nodes: 10000000 };
const LONG_FLAGS = ['--bot-max-deals', '100000', '--bot-max-nodes', '100000000'];
const WAIT_MS = 10000;

let servers = [];
let RulesService;

before(async () => {
  RulesService = loadRulesService();
  servers = await Promise.all([
    startServer(['--workers', '1', '--admission-limit', '1', ...LONG_FLAGS]),
    startServer(['--workers', '1']),
  ]);
});

after(async () => {
  await Promise.all(servers.map((server) => stopServer(server.child)));
});

function channelToBoth() {
  const target = `ipv4:${servers.map((server) => server.address).join(',')}`;
  return new RulesService(target, grpc.credentials.createInsecure(), {
    'grpc.service_config': fs.readFileSync(SERVICE_CONFIG, 'utf8'),
  });
}

const newMatch = (client) => unary(client, 'NewMatch', { labels: ['js'] });
const answered = (server) => server.calls.NewMatch ?? 0;

// Calls until both servers have answered one (both subchannels ready), bounded in time.
async function untilBothAnswered(client) {
  const until = Date.now() + WAIT_MS;
  while (!servers.every((server) => answered(server) > 0)) {
    assert.ok(Date.now() < until, 'the channel never used both servers');
    await newMatch(client);
  }
}

// The log line of a call comes just after its answer: wait for the count to settle.
async function settled(counts) {
  const until = Date.now() + WAIT_MS;
  let last = JSON.stringify(counts());
  for (;;) {
    await new Promise((resolve) => setTimeout(resolve, 200));
    const now = JSON.stringify(counts());
    if (now === last || Date.now() > until) return JSON.parse(now);
    last = now;
  }
}

test('one channel with the published config spreads calls over two servers', async () => {
  const client = channelToBoth();
  try {
    await untilBothAnswered(client);
    const before = await settled(() => servers.map(answered));
    for (let n = 0; n < 10; n += 1) await newMatch(client);
    const afterwards = await settled(() => servers.map(answered));
    assert.deepEqual(
      afterwards.map((count, index) => count - before[index]),
      [5, 5],
    );
  } finally {
    client.close();
  }
});

test('one channel with the published config retries a shed call on the other server', async () => {
  const [full] = servers;
  const client = channelToBoth();
  const direct = new RulesService(full.address, grpc.credentials.createInsecure());
  try {
    await untilBothAnswered(client);
    const { state } = await newMatch(direct);
    let heldDone = false;
    // Held with a long deadline, and cancelled once the test has seen what it needs.
    const held = direct.SuggestMove(
      { state, seat: state.to_move ?? 0, level: 'BOT_LEVEL_STRONG', budget: LONG_BUDGET },
      { deadline: new Date(Date.now() + 60000) },
      () => {
        heldDone = true;
      },
    );
    // The full server sheds what comes while the long call holds its one place.
    const until = Date.now() + WAIT_MS;
    for (;;) {
      assert.ok(Date.now() < until, 'the server never filled');
      const refused = await newMatch(direct).then(
        () => null,
        (error) => error,
      );
      if (refused?.code === grpc.status.RESOURCE_EXHAUSTED) break;
    }
    // Half of these are picked for the full server first: shed, then retried on the other.
    for (let n = 0; n < 4; n += 1) assert.ok((await newMatch(client)).state);
    assert.equal(heldDone, false, 'the full server was full throughout');
    held.cancel();
  } finally {
    direct.close();
    client.close();
  }
});
