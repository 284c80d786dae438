// The example lobby: an HTTP server for browsers (JSON calls, server-sent events for updates,
// the static pages of public/) in front of the Basra rules service.
//
//   node server.mjs [--rules HOST:PORT] [--port N] [--host ADDR] [--bot-delay-ms N]
//
// Defaults: the rules service at localhost:50051 (BASRA_RULES_ADDRESS), the lobby on
// 127.0.0.1:8080 (LOBBY_PORT; 0 picks a free port). Once it listens it prints one JSON line
// {"event":"listening","url":...}.

import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

import { DIFFICULTIES, LEVELS, Lobby, LobbyError } from './matches.mjs';
import { replay } from './replay.mjs';
import { connect } from './rules.mjs';

const PUBLIC = path.join(path.dirname(fileURLToPath(import.meta.url)), 'public');
const TYPES = { '.html': 'text/html', '.js': 'text/javascript', '.css': 'text/css', '.png': 'image/png' };
const MAX_BODY_BYTES = 2 * 1024 * 1024;
const KEEPALIVE_MS = 15000;

// Buffers (the seed commitment, a revealed seed) go to browsers as hex.
const toJSON = (value) =>
  JSON.stringify(value, (key, item) =>
    item?.type === 'Buffer' && Array.isArray(item.data) ? Buffer.from(item.data).toString('hex') : item,
  );

function reply(response, status, body) {
  response.writeHead(status, { 'content-type': 'application/json' });
  response.end(toJSON(body));
}

async function readJSON(request) {
  let size = 0;
  const chunks = [];
  for await (const chunk of request) {
    size += chunk.length;
    if (size > MAX_BODY_BYTES) throw new LobbyError(413, 'request too large');
    chunks.push(chunk);
  }
  try {
    return JSON.parse(Buffer.concat(chunks).toString('utf8') || '{}');
  } catch {
    throw new LobbyError(400, 'the body is not JSON');
  }
}

function level(name) {
  if (!LEVELS.includes(name)) throw new LobbyError(400, `level must be one of ${LEVELS.join(', ')}`);
  return name;
}

function difficulty(name) {
  if (!Object.hasOwn(DIFFICULTIES, name)) {
    throw new LobbyError(400, `difficulty must be one of ${Object.keys(DIFFICULTIES).join(', ')}`);
  }
  return name;
}

function seatNumber(value) {
  const seat = Number(value);
  if (seat !== 0 && seat !== 1) throw new LobbyError(400, 'seat must be 0 or 1');
  return seat;
}

// A player's action from the browser: the card and at most one choice, nothing else.
function actionOf(body) {
  const action = { card: String(body.card ?? '') };
  if (body.plan_id !== undefined) action.plan_id = Number(body.plan_id);
  if (body.trail) action.trail = true;
  return action;
}

// A new match from the front page's form: seat 0 is the person asking; seat 1 a bot or a guest.
function newMatchOf(body) {
  const name = (text, otherwise) => String(text ?? otherwise).slice(0, 64);
  const turnSeconds = Math.max(0, Math.min(600, Number(body.turnSeconds) || 0));
  if (body.opponent === 'human') {
    return { labels: [name(body.name, 'You'), name(body.opponentName, 'Guest')], seats: [{ human: true }, { human: true }], turnSeconds };
  }
  const strength = difficulty(String(body.difficulty ?? 'casual'));
  const seats = [{ human: true }, { ...DIFFICULTIES[strength] }];
  return { labels: [name(body.name, 'You'), `${strength} bot`], seats, turnSeconds };
}

function serveStatic(url, response) {
  const name = url.pathname === '/' ? 'index.html' : url.pathname.slice(1);
  const file = path.resolve(PUBLIC, name);
  if (!file.startsWith(PUBLIC + path.sep) || !fs.existsSync(file) || !fs.statSync(file).isFile()) {
    return reply(response, 404, { error: 'not found' });
  }
  response.writeHead(200, { 'content-type': TYPES[path.extname(file)] ?? 'application/octet-stream' });
  fs.createReadStream(file).pipe(response);
}

// Server-sent events: one `data:` line of JSON per update, for one seat or for spectators.
function stream(lobby, match, seat, request, response) {
  response.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-store' });
  const unwatch = lobby.watch(match, seat, (message) => response.write(`data: ${toJSON(message)}\n\n`));
  const keepalive = setInterval(() => response.write(': keepalive\n\n'), KEEPALIVE_MS);
  request.on('close', () => {
    clearInterval(keepalive);
    unwatch();
  });
}

async function route(lobby, rules, request, response) {
  const url = new URL(request.url, 'http://lobby');
  const parts = url.pathname.split('/').filter(Boolean); // api, matches, ID, verb
  if (parts[0] !== 'api') return serveStatic(url, response);
  const post = request.method === 'POST';

  if (parts[1] === 'matches' && parts.length === 2) {
    if (!post) return reply(response, 200, { matches: lobby.list() });
    const match = await lobby.create(newMatchOf(await readJSON(request)));
    return reply(response, 200, { id: match.id, seats: match.seats.map((seat) => seat.token) });
  }

  if (parts[1] === 'matches' && parts.length >= 3) {
    const match = lobby.get(parts[2]);
    const verb = parts[3];
    if (verb === 'events' && !post) {
      const seat = url.searchParams.has('seat') ? seatNumber(url.searchParams.get('seat')) : null;
      if (seat !== null) lobby.seatOf(match, seat, url.searchParams.get('token'));
      return stream(lobby, match, seat, request, response);
    }
    if (post && (verb === 'play' || verb === 'hint')) {
      const body = await readJSON(request);
      const seat = lobby.seatOf(match, seatNumber(body.seat), body.token);
      if (verb === 'hint') return reply(response, 200, await lobby.hint(match, seat, level(body.level)));
      await lobby.play(match, seat, actionOf(body), Number(body.seq));
      return reply(response, 200, { ok: true });
    }
  }

  if (parts[1] === 'replay' && post) return reply(response, 200, await replay(rules, await readJSON(request)));
  return reply(response, 404, { error: 'not found' });
}

function main() {
  const { values } = parseArgs({
    options: {
      rules: { type: 'string', default: process.env.BASRA_RULES_ADDRESS ?? 'localhost:50051' },
      host: { type: 'string', default: process.env.LOBBY_HOST ?? '127.0.0.1' },
      port: { type: 'string', default: process.env.LOBBY_PORT ?? '8080' },
      'bot-delay-ms': { type: 'string', default: process.env.LOBBY_BOT_DELAY_MS ?? '600' },
    },
  });
  const log = (line) => console.log(JSON.stringify(line));
  const rules = connect(values.rules);
  const lobby = new Lobby(rules, { botDelayMs: Number(values['bot-delay-ms']), log });

  const server = http.createServer((request, response) => {
    route(lobby, rules, request, response).catch((error) => {
      // A refusal of the rules service carries its reason code: the page shows it.
      if (error.reason) return reply(response, error.status === 'UNAVAILABLE' ? 503 : 409, { refusal: error });
      if (error instanceof LobbyError || error.status) return reply(response, error.status, { error: error.message });
      log({ event: 'error', error: error.stack });
      return reply(response, 500, { error: 'internal error' });
    });
  });
  server.listen(Number(values.port), values.host, () => {
    const { port } = server.address();
    log({ event: 'listening', url: `http://${values.host}:${port}/`, rules: values.rules });
  });
  const stop = () => {
    lobby.close();
    rules.close();
    server.close();
    server.closeAllConnections();
  };
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
}

main();
