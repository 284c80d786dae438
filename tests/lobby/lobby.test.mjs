// End to end: the rules service and the example lobby, started the way a person starts them
// (`bash examples/lobby/try.sh`, here on free ports), and the lobby's pages driven in headless
// Chromium by clicking: a whole match against the bot, a refused move, a hint, a spectator who
// must never receive a hand card, the turn timer, and the replay of a recorded match. A second
// part drives the lobby's module directly against a rules service that signs its states.
//
// Screenshots go to tests/lobby/output/ (git-ignored). Chromium is Debian's (/usr/bin/chromium,
// installed by .ci/setup; BASRA_CHROMIUM names another); the flags keep it off the network.

import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import readline from 'node:readline';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

import grpc from '@grpc/grpc-js';
import { chromium } from 'playwright-core';

import { DIFFICULTIES, Lobby } from '../../examples/lobby/matches.mjs';
import { connect, loadService } from '../../examples/lobby/rules.mjs';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const REPO = path.resolve(HERE, '..', '..');
const OUTPUT = path.join(HERE, 'output');
const BASRA = path.join(REPO, '.venv', 'bin', 'basra-rules');
const STARTUP_MS = 180000;
const CARD = /\b(?:10|[2-9AJQK])[CDHS]\b/g;
const MAX_PLAYS = 400; // a match is a few hands of 48 plays; half of them are ours

const temp = fs.mkdtempSync(path.join(os.tmpdir(), 'lobby-e2e-'));
const children = [];
process.once('exit', () => {
  for (const child of children) if (child.exitCode === null) process.kill(-child.pid, 'SIGKILL');
});

// Start a command in its own process group and wait for the JSON line `ready` accepts.
function start(command, args, env, ready) {
  const child = spawn(command, args, { cwd: REPO, env: { ...process.env, ...env }, detached: true });
  children.push(child);
  let output = '';
  child.stderr.on('data', (chunk) => {
    output = (output + chunk).slice(-4000);
  });
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${command} did not start:\n${output}`)), STARTUP_MS);
    readline.createInterface({ input: child.stdout }).on('line', (text) => {
      output = (output + text + '\n').slice(-4000);
      let line;
      try {
        line = JSON.parse(text);
      } catch {
        return;
      }
      if (ready(line)) {
        clearTimeout(timer);
        resolve({ child, line });
      }
    });
    child.on('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`${command} exited (${code}):\n${output}`));
    });
  });
}

function stop(child) {
  if (child.exitCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    const force = setTimeout(() => process.kill(-child.pid, 'SIGKILL'), 20000);
    child.once('exit', () => {
      clearTimeout(force);
      resolve();
    });
    process.kill(-child.pid, 'SIGTERM');
  });
}

// Every card code of a message must be public: on the floor of its view, or named by one of
// its events (a play, a capture, the floor's deal); a hand holder's cards appear nowhere else.
function checkSpectatorMessage(message) {
  const { view, events } = message;
  assert.ok(view, 'every update carries the public view');
  assert.equal(view.hand, undefined, 'no hand in a public view');
  assert.equal(view.legal_moves, undefined, 'no legal moves (they name the hand) in a public view');
  assert.equal(view.deck, undefined, 'no deck in a public view');
  if (view.status !== 'STATUS_OVER') assert.equal(view.seed, undefined, 'no seed before the end');
  const known = new Set(view.floor ?? []);
  for (const event of events) {
    const body = event[event.kind];
    if (event.kind === 'cards_dealt') assert.equal(body.seat, undefined, 'no seat deal shown to spectators');
    if (event.kind === 'hidden_deal') continue;
    for (const card of JSON.stringify(body).match(CARD) ?? []) known.add(card);
  }
  for (const card of JSON.stringify(message).match(CARD) ?? []) {
    assert.ok(known.has(card), `spectators were sent ${card}, which is no public card`);
  }
}

// Buffers as the lobby sends them to browsers: hex.
const bytesAsHex = (key, item) =>
  item?.type === 'Buffer' && Array.isArray(item.data) ? Buffer.from(item.data).toString('hex') : item;

let lobbyUrl;
let rulesAddress;
let context;
let lobbyProcess;

describe('the example lobby in a browser', () => {
  before(async () => {
    fs.rmSync(OUTPUT, { recursive: true, force: true });
    fs.mkdirSync(OUTPUT, { recursive: true });
    const { child, line } = await start(
      'bash',
      [path.join('examples', 'lobby', 'try.sh')],
      { LOBBY_PORT: '0', LOBBY_BOT_DELAY_MS: '0' },
      (l) => l.event === 'listening',
    );
    lobbyProcess = child;
    lobbyUrl = line.url;
    rulesAddress = line.rules;
    context = await chromium.launchPersistentContext(fs.mkdtempSync(path.join(temp, 'chromium-')), {
      executablePath: process.env.BASRA_CHROMIUM ?? '/usr/bin/chromium',
      headless: true,
      viewport: { width: 1200, height: 820 },
      args: [
        '--no-sandbox',
        '--disable-gpu',
        '--disable-quic',
        '--no-first-run',
        '--disable-background-networking',
        '--disable-component-update',
        '--disable-sync',
      ],
    });
  });

  after(async () => {
    await context?.close();
    if (lobbyProcess) await stop(lobbyProcess);
  });

  // The messages of the page's server-sent event stream, as Chromium received them.
  async function received(page) {
    const messages = [];
    const session = await context.newCDPSession(page);
    session.on('Network.eventSourceMessageReceived', ({ data }) => messages.push(JSON.parse(data)));
    await session.send('Network.enable');
    return messages;
  }

  const seqOf = (page) => page.evaluate(() => Number(document.body.dataset.seq));
  const texts = (page, selector) => page.locator(selector).evaluateAll((all) => all.map((e) => e.dataset.card));

  test('a whole match against the bot, played by clicking; a spectator sees no hand card', async () => {
    const page = await context.newPage();
    await page.goto(lobbyUrl);
    await page.fill('#name', 'Tester');
    await page.selectOption('#difficulty', 'casual');
    await page.click('#create');
    await page.waitForURL(/table\.html/);
    const match = new URL(page.url()).searchParams.get('match');
    const seatMessages = await received(page);

    const watcher = await context.newPage();
    const spectatorMessages = await received(watcher);
    await watcher.goto(`${lobbyUrl}table.html?match=${match}`);
    // Chromium paces a background tab's frames, which slows every click there: the table in front.
    await page.bringToFront();

    let plays = 0;
    let refused = false;
    let hinted = false;
    let pictured = false;
    while (plays < MAX_PLAYS) {
      await page.waitForSelector('body[data-turn="mine"], body[data-turn="over"]');
      if ((await page.getAttribute('body', 'data-turn')) === 'over') break;
      const seq = await seqOf(page);
      const capturing = page.locator('#hand .card:not([data-plans="0"])');

      if (!refused && (await capturing.count()) > 0) {
        // Trailing a card that can capture: the service refuses it, and nothing changes.
        const hand = await texts(page, '#hand .card');
        const floor = await texts(page, '#floor .card');
        await capturing.first().click();
        await page.screenshot({ path: path.join(OUTPUT, 'table-plans.png') });
        await page.click('#trail');
        await page.waitForSelector('#refusal:not([hidden])');
        assert.equal(await page.getAttribute('#refusal', 'data-reason'), 'MUST_CAPTURE');
        assert.match(await page.textContent('#refusal'), /cannot be trailed/);
        await page.screenshot({ path: path.join(OUTPUT, 'table-refused.png') });
        assert.equal(await seqOf(page), seq);
        assert.deepEqual(await texts(page, '#hand .card'), hand);
        assert.deepEqual(await texts(page, '#floor .card'), floor);
        refused = true;
      }
      if (!pictured && plays >= 20 && (await capturing.count()) > 0) {
        // The picture of the README: a card chosen, its first plan pointed at on the floor.
        await capturing.first().click();
        await page.hover('#plans button[data-plan]');
        await page.screenshot({ path: path.join(OUTPUT, 'table.png') });
        pictured = true;
      }
      if (!hinted) {
        await page.selectOption('#hint-level', 'BOT_LEVEL_STRONG');
        await page.click('#hint');
        await page.waitForFunction(() => document.getElementById('hint-text').textContent.length > 0);
        assert.match(await page.textContent('#hint-text'), /^strong suggests \S+.* \([A-Z_]+\)$/);
        const card = await page.getAttribute('#hint-text', 'data-card');
        assert.ok((await texts(page, '#hand .card')).includes(card), 'the hint names a card of the hand');
        hinted = true;
      }

      // Choose the first card; take its first plan, or trail it when it has none.
      await page.locator('#hand .card').first().click();
      const plan = page.locator('#plans button[data-plan]');
      await ((await plan.count()) > 0 ? plan.first() : page.locator('#trail')).click();
      await page.waitForFunction((before) => Number(document.body.dataset.seq) > before, seq);
      plays += 1;
    }
    assert.ok(refused && pictured, 'a refused move was tried, and the table pictured');
    assert.ok(plays >= 24, `played ${plays} moves`);
    assert.match(await page.textContent('#status'), /wins \d+ to \d+/);
    const seed = await page.textContent('#seed code');
    const commitment = await page.textContent('#commitment');
    assert.equal(crypto.createHash('sha256').update(Buffer.from(seed, 'hex')).digest('hex'), commitment);
    await page.screenshot({ path: path.join(OUTPUT, 'table-over.png') });

    await watcher.bringToFront();
    await watcher.waitForSelector('body[data-turn="over"]');
    await watcher.screenshot({ path: path.join(OUTPUT, 'spectator.png') });
    assert.ok(spectatorMessages.length > plays, 'the spectator saw every play');
    spectatorMessages.forEach(checkSpectatorMessage);
    assert.equal(await watcher.locator('#controls').isHidden(), true);
    // The seat's own stream did carry its hand: the check above is not vacuous.
    assert.ok(seatMessages.some((message) => (message.view.hand ?? []).length > 0));
  });

  test('a seat that runs out of time is played for by the bot', async () => {
    const page = await context.newPage();
    await page.goto(lobbyUrl);
    await page.selectOption('#opponent', 'human');
    await page.fill('#turn', '1');
    await page.click('#create');
    const link = page.locator('#links a').first();
    await link.waitFor();
    await page.goto(new URL(await link.getAttribute('href'), lobbyUrl).href);
    // Nobody clicks: two turns later both seats have been played for.
    await page.waitForFunction(() => Number(document.body.dataset.seq) >= 2, null, { timeout: 30000 });
    assert.match(await page.textContent('#events'), /Time ran out for \S+: the greedy bot played/);
  });

  test('the replay page steps through every action of a recorded match, both ways', async () => {
    const record = path.join(temp, 'match.json');
    await promisify(execFile)(BASRA, [
      'play', '--target', rulesAddress, '--seed', '6c6f626279', '--bots', 'greedy', 'random', '--record', record,
    ]);
    const { actions } = JSON.parse(fs.readFileSync(record, 'utf8'));
    const page = await context.newPage();
    await page.goto(`${lobbyUrl}replay.html`);
    await page.setInputFiles('#record', record);
    await page.waitForSelector('body[data-step="0"]');
    assert.equal(await page.textContent('#step'), `step 0 of ${actions.length}`);
    assert.equal(await page.isVisible('#problem'), false);
    // The page draws a step as it handles the click or key, so one look after each suffices.
    const look = () => page.evaluate(() => [Number(document.body.dataset.step), document.getElementById('action').dataset.card]);
    const expected = (step) => [step, step === 0 ? '' : actions[step - 1].card];
    for (let step = 1; step <= actions.length; step += 1) {
      await (step <= 10 ? page.click('#forward') : page.keyboard.press('ArrowRight'));
      assert.deepEqual(await look(), expected(step));
      if (step === 40) await page.screenshot({ path: path.join(OUTPUT, 'replay.png') });
    }
    assert.equal(await page.isDisabled('#forward'), true);
    assert.match(await page.textContent('#events'), /wins/);
    for (let step = actions.length - 1; step >= 0; step -= 1) {
      await (step < 10 ? page.click('#back') : page.keyboard.press('ArrowLeft'));
      assert.deepEqual(await look(), expected(step));
    }
    assert.equal(await page.isDisabled('#back'), true);
  });
});

describe('the lobby module against a rules service that signs its states', () => {
  let server;
  let rules;

  before(async () => {
    const key = crypto.randomBytes(32).toString('base64');
    const started = await start(
      BASRA,
      ['serve', '--host', '127.0.0.1', '--port', '0', '--metrics-port', '0', '--log-format', 'json'],
      { BASRA_SIGNING_KEYS: `e2e:${key}` },
      (line) => line.event === 'serving',
    );
    server = started.child;
    rules = connect(`127.0.0.1:${started.line.port}`);
  });

  after(async () => {
    rules?.close();
    if (server) await stop(server);
  });

  async function until(condition, what) {
    const deadline = Date.now() + 120000;
    while (!condition()) {
      assert.ok(Date.now() < deadline, `timed out waiting for ${what}`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }

  test('bot against bot: each move the signed state with expected_seq; each audience its own cards; each bot its strength', async () => {
    const applied = [];
    const asked = [];
    const observed = {
      ...rules,
      apply: (request) => applied.push(request) && rules.apply(request),
      suggestMove: async (request) => {
        const answer = await rules.suggestMove(request);
        asked.push({ request, answer });
        return answer;
      },
    };
    const lobby = new Lobby(observed, { botDelayMs: 0 });
    const match = await lobby.create({
      labels: ['novice', 'casual'],
      seats: [{ ...DIFFICULTIES.novice }, { ...DIFFICULTIES.casual }],
    });
    const got = [[], [], []];
    lobby.watch(match, 0, (message) => got[0].push(message));
    lobby.watch(match, 1, (message) => got[1].push(message));
    lobby.watch(match, null, (message) => got[2].push(message));
    await until(() => match.state.status === 'STATUS_OVER', 'the end of the match');
    await match.published;
    lobby.close();

    assert.equal(applied.length, match.actions.length);
    // The novice seat asks STRONG with its small budget, and the service searched within it;
    // the casual seat asks GREEDY with no budget.
    assert.equal(asked.length, applied.length);
    for (const { request, answer } of asked) {
      if (request.seat === 0) {
        assert.equal(request.level, 'BOT_LEVEL_STRONG');
        assert.deepEqual(request.budget, { deals: 1, nodes: 60 });
        assert.ok(Number(answer.work?.nodes ?? 0) <= 60, `nodes ${answer.work?.nodes}`);
        assert.ok(Number(answer.work?.deals ?? 0) <= 1, `deals ${answer.work?.deals}`);
      } else {
        assert.equal(request.level, 'BOT_LEVEL_GREEDY');
        assert.equal(request.budget, undefined);
      }
    }
    assert.ok(asked.some(({ request, answer }) => request.seat === 0 && Number(answer.work?.nodes ?? 0) > 0));
    applied.forEach((request, seq) => {
      assert.equal(request.state, undefined, 'a signing service gets the signed state alone');
      assert.equal(request.signed_state.key_id, 'e2e');
      assert.equal(request.expected_seq, seq);
    });
    for (const seat of [0, 1]) {
      const events = got[seat].flatMap((message) => message.events);
      assert.equal(events.filter((e) => e.kind === 'hand_started').length, match.state.hand_number);
      for (const event of events) {
        if (event.kind === 'cards_dealt' && event.cards_dealt.seat !== undefined) {
          assert.equal(event.cards_dealt.seat, seat, "no seat receives the other seat's cards");
        }
      }
      const last = got[seat].at(-1).view;
      assert.equal(last.status, 'STATUS_OVER');
      assert.equal(crypto.createHash('sha256').update(last.seed).digest('hex'), last.seed_commitment.toString('hex'));
    }
    got[2].forEach((message) => checkSpectatorMessage(JSON.parse(JSON.stringify(message, bytesAsHex))));
    assert.equal(got[2].flatMap((message) => message.events).filter((e) => e.kind === 'match_over').length, 1);
  });

  test('a move made on an old view is refused with SEQ_MISMATCH and changes nothing', async () => {
    const lobby = new Lobby(rules, { botDelayMs: 0 });
    const match = await lobby.create({ labels: ['you', 'bot'], seats: [{ human: true }, { bot: 'BOT_LEVEL_GREEDY' }] });
    await until(() => match.state.to_move === 0, 'seat 0 to move');
    const seq = match.state.seq ?? 0;
    const card = (await rules.playerView({ signed_state: match.signed, seat: 0 })).view.hand[0];
    await assert.rejects(lobby.play(match, 0, { card }, seq === 0 ? 1 : seq - 1), (error) => error.reason === 'SEQ_MISMATCH');
    assert.equal(match.state.seq ?? 0, seq);
    await assert.rejects(lobby.play(match, 1, { card }, seq), (error) => error.reason === 'NOT_YOUR_TURN');
    lobby.close();
  });
});

describe("the lobby's calls follow the published retry policy", () => {
  // A stand-in rules service that answers NewMatch with `failures` errors before a good answer.
  async function flakyService(failures) {
    const server = new grpc.Server();
    const calls = [];
    server.addService(loadService().service, {
      NewMatch: (call, callback) => {
        calls.push(call.request);
        const code = failures[calls.length - 1];
        if (code === undefined) callback(null, { state: { seq: 7 } });
        else callback({ code, details: 'overloaded' });
      },
    });
    const port = await new Promise((resolve, reject) =>
      server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (error, bound) =>
        error ? reject(error) : resolve(bound),
      ),
    );
    return { server, calls, address: `127.0.0.1:${port}` };
  }

  test('UNAVAILABLE, CANCELLED and RESOURCE_EXHAUSTED are retried; other codes are not', async () => {
    const policy = JSON.parse(fs.readFileSync(path.join(REPO, 'deploy', 'grpc-service-config.json'), 'utf8'));
    const attempts = policy.methodConfig[0].retryPolicy.maxAttempts;
    const retried = await flakyService([grpc.status.UNAVAILABLE, grpc.status.CANCELLED, grpc.status.RESOURCE_EXHAUSTED]);
    const refused = await flakyService([grpc.status.FAILED_PRECONDITION]);
    const down = await flakyService(Array(attempts).fill(grpc.status.UNAVAILABLE));
    try {
      const rules = connect(retried.address);
      assert.equal((await rules.newMatch({ labels: ['a'] })).state.seq, 7);
      assert.equal(retried.calls.length, 4);
      rules.close();

      const other = connect(refused.address);
      await assert.rejects(other.newMatch({}), (error) => error.reason === 'FAILED_PRECONDITION');
      assert.equal(refused.calls.length, 1);
      other.close();

      const gone = connect(down.address);
      await assert.rejects(gone.newMatch({}), (error) => error.reason === 'UNAVAILABLE');
      assert.equal(down.calls.length, attempts, 'at most maxAttempts calls');
      gone.close();
    } finally {
      for (const { server } of [retried, refused, down]) server.forceShutdown();
    }
  });
});
