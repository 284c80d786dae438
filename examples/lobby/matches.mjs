// Matches held in memory. The rules service keeps nothing between calls, so the lobby keeps,
// per match, the last state the service returned (and its signed form when the service signs
// states) and sends it back with the next call. Players never see that state: each seat gets
// its own PlayerView and seat events, spectators the public view and public events.

import crypto from 'node:crypto';

export const LEVELS = ['BOT_LEVEL_RANDOM', 'BOT_LEVEL_GREEDY', 'BOT_LEVEL_STRONG'];
// The strengths this lobby offers people, weakest first, as bot seats: a level and, for
// STRONG, a budget of search (docs/bot.md, "Difficulty", measures each step against its
// neighbours; `strong` takes the service's default). The names are the lobby's own: the
// service's contract has levels and budgets, which stay exact whatever a name means.
export const DIFFICULTIES = {
  beginner: { bot: 'BOT_LEVEL_RANDOM' },
  novice: { bot: 'BOT_LEVEL_STRONG', budget: { deals: 1, nodes: 60 } },
  casual: { bot: 'BOT_LEVEL_GREEDY' },
  club: { bot: 'BOT_LEVEL_STRONG', budget: { deals: 4, nodes: 500 } },
  strong: { bot: 'BOT_LEVEL_STRONG' },
};
const SPECTATORS = 2; // index of the spectators' audience, after seat 0 and seat 1

/** A request the lobby refuses itself (unknown match, wrong token, ...): an HTTP status. */
export class LobbyError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

// The state to send back: the signed state when the service signs, else the plain one.
function current(match) {
  return match.signed ? { signed_state: match.signed } : { state: match.state };
}

export class Lobby {
  constructor(rules, { botDelayMs = 600, log = () => {} } = {}) {
    this.rules = rules;
    this.botDelayMs = botDelayMs;
    this.log = log;
    this.matches = new Map();
  }

  /**
   * Deal a new match. `seats` holds one entry per seat: { human: true } or a bot seat,
   * { bot: LEVEL } or { bot: 'BOT_LEVEL_STRONG', budget: { deals, nodes } } (DIFFICULTIES).
   * `turnSeconds` (0: no timer) is how long a human seat has before the bot plays for it.
   */
  async create({ labels = ['', ''], seats, turnSeconds = 0, timeoutLevel = 'BOT_LEVEL_GREEDY', seed }) {
    const answer = await this.rules.newMatch({ labels, ...(seed ? { seed } : {}) });
    const match = {
      id: crypto.randomUUID(),
      labels,
      seats: seats.map((seat) => ({ ...seat, token: seat.human ? crypto.randomBytes(16).toString('hex') : null })),
      turnMs: turnSeconds * 1000,
      timeoutLevel,
      state: answer.state,
      signed: answer.signed_state ?? null,
      actions: [],
      logs: [[], [], []], // events as seat 0, seat 1 and spectators may see them
      watchers: new Set(),
      published: Promise.resolve(),
      timer: null,
      deadline: null,
    };
    this.matches.set(match.id, match);
    this.#record(match, answer, null);
    return match;
  }

  get(id) {
    const match = this.matches.get(id);
    if (!match) throw new LobbyError(404, `no match ${id}`);
    return match;
  }

  /** The seat a token holds, or an error (a human seat's token is its only credential). */
  seatOf(match, seat, token) {
    const held = match.seats[seat];
    const given = Buffer.from(String(token ?? ''));
    const expected = Buffer.from(held?.token ?? '');
    if (!held?.token || given.length !== expected.length || !crypto.timingSafeEqual(given, expected)) {
      throw new LobbyError(403, `that is not the token of seat ${seat}`);
    }
    return seat;
  }

  /** What everybody may know of the matches: no cards. */
  list() {
    return [...this.matches.values()].map((match) => ({
      id: match.id,
      labels: match.labels,
      seats: match.seats.map((seat) => (seat.human ? 'human' : seat.bot)),
      seq: match.state.seq ?? 0,
      status: match.state.status,
    }));
  }

  /**
   * Play a seat's action. `seq` is the seq of the view the player acted on: the service refuses
   * the action (SEQ_MISMATCH) if the match has moved on since, so a double click or a click on
   * an old view never lands on a newer position. A refusal is thrown as the service gave it.
   */
  async play(match, seat, action, seq) {
    return this.#apply(match, { ...action, seat }, seq, null);
  }

  /** Ask the bot what `seat` should play, at `level`, from what that seat may see. */
  async hint(match, seat, level) {
    return this.rules.suggestMove({ ...current(match), seat, level });
  }

  /** Send `send(message)` every update for `seat` (0 or 1) or, with seat null, for spectators. */
  watch(match, seat, send) {
    const audience = seat ?? SPECTATORS;
    const watcher = { audience, send };
    // The events so far, and from the next update on, the updates: queued behind the updates
    // already on their way, so that every event reaches the watcher exactly once, in order.
    const events = [...match.logs[audience]];
    this.#enqueue(match, async () => {
      match.watchers.add(watcher);
      send({ view: await this.#view(match, audience).catch(() => null), events, deadline: match.deadline });
    });
    return () => match.watchers.delete(watcher);
  }

  // Apply an action with expected_seq; store the answer only if nothing else was stored since
  // (with a database: UPDATE ... WHERE id = ? AND seq = ?), then tell everybody.
  async #apply(match, action, seq, note) {
    const answer = await this.rules.apply({ ...current(match), action, expected_seq: seq });
    if ((match.state.seq ?? 0) !== seq) {
      // Another action (the turn timer, a second click) was stored first.
      throw Object.assign(new Error('Another action was played first.'), {
        reason: 'SEQ_MISMATCH',
        toJSON: () => ({ reason: 'SEQ_MISMATCH', message: 'Another action was played first.' }),
      });
    }
    match.actions.push(action);
    this.#record(match, answer, note);
    return answer;
  }

  // Keep the new state, log each audience's events, publish, and start the next turn.
  #record(match, answer, note) {
    match.state = answer.state;
    match.signed = answer.signed_state ?? null;
    const audiences = [answer.seat_events[0].events, answer.seat_events[1].events, answer.public_events];
    audiences.forEach((events, audience) => match.logs[audience].push(...events));
    this.#nextTurn(match);
    this.#enqueue(match, () => this.#publish(match, audiences, note));
  }

  // Updates go out in order: each waits for the one before.
  #enqueue(match, step) {
    match.published = match.published.then(step).catch((error) => {
      this.log({ event: 'publish_failed', match: match.id, error: error.message });
    });
  }

  async #publish(match, audiences, note) {
    for (const audience of new Set([...match.watchers].map((watcher) => watcher.audience))) {
      // Without a view (the service unreachable after its retries), the events still go out.
      const view = await this.#view(match, audience).catch(() => null);
      const message = { view, events: audiences[audience], deadline: match.deadline, ...(note ? { note } : {}) };
      for (const watcher of match.watchers) if (watcher.audience === audience) watcher.send(message);
    }
  }

  // A seat's own view (its hand and, on its turn, its legal moves) or the spectators' public view.
  async #view(match, audience) {
    if (audience === SPECTATORS) {
      return (await this.rules.playerView({ ...current(match), spectator: true })).public_view;
    }
    return (await this.rules.playerView({ ...current(match), seat: audience })).view;
  }

  // A bot seat plays after a short pause; a human seat gets its turn timer, if the match has one.
  #nextTurn(match) {
    clearTimeout(match.timer);
    match.timer = null;
    match.deadline = null;
    const seat = match.state.to_move;
    if (match.state.status !== 'STATUS_IN_PROGRESS' || seat === undefined) return;
    const { bot, budget } = match.seats[seat];
    if (bot) {
      match.timer = setTimeout(() => this.#autoplay(match, seat, bot, budget, null), this.botDelayMs);
    } else if (match.turnMs > 0) {
      match.deadline = Date.now() + match.turnMs;
      match.timer = setTimeout(
        () => this.#autoplay(match, seat, match.timeoutLevel, undefined, { timeout: seat }),
        match.turnMs,
      );
    }
  }

  // SuggestMove for the seat to move (with the seat's budget, if it has one), then Apply of
  // exactly that action.
  async #autoplay(match, seat, level, budget, note) {
    const seq = match.state.seq ?? 0;
    try {
      const request = { ...current(match), seat, level, ...(budget ? { budget } : {}) };
      const { action, reason } = await this.rules.suggestMove(request);
      await this.#apply(match, action, seq, { ...note, seat, level, reason });
    } catch (error) {
      // A human's move got in first (SEQ_MISMATCH), or the service stayed unreachable after its
      // retries: nothing was stored, so try again on the position as it is now.
      this.log({ event: 'autoplay_failed', match: match.id, seat, reason: error.reason ?? error.message });
      if ((match.state.seq ?? 0) === seq) {
        match.timer = setTimeout(() => this.#autoplay(match, seat, level, budget, note), 1000);
      }
    }
  }

  close() {
    for (const match of this.matches.values()) clearTimeout(match.timer);
  }
}
