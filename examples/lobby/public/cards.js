// What the pages share: drawing cards, one line of text per event, JSON calls to the lobby.

const SUITS = { C: ['♣', 'black'], D: ['♦', 'red'], H: ['♥', 'red'], S: ['♠', 'black'] };

/** An element showing card `code` ("10D"), or the back of a card when `code` is null. */
export function cardElement(code, tag = 'span') {
  const element = document.createElement(tag);
  element.className = 'card';
  if (code === null) {
    element.classList.add('back');
    return element;
  }
  const [symbol, colour] = SUITS[code.slice(-1)];
  element.classList.add(colour);
  element.dataset.card = code;
  element.textContent = code.slice(0, -1) + symbol;
  return element;
}

/** Replace the children of `parent` with cards. */
export function showCards(parent, codes, tag = 'span') {
  parent.replaceChildren(...codes.map((code) => cardElement(code, tag)));
}

const list = (cards) => (cards?.length ? cards.join(' ') : '-');
const LEVEL_NAMES = { BOT_LEVEL_RANDOM: 'random', BOT_LEVEL_GREEDY: 'greedy', BOT_LEVEL_STRONG: 'strong' };
export const levelName = (level) => LEVEL_NAMES[level] ?? level;

/** One line for an event as the lobby forwards it (fields left out are 0, as in protobuf). */
export function describe(event, names) {
  const name = (seat) => names[seat ?? 0] || `seat ${seat ?? 0}`;
  const body = event[event.kind];
  switch (event.kind) {
    case 'hand_started':
      return `Hand ${body.hand_number}: ${name(body.dealer)} deals`;
    case 'cards_dealt':
      return body.seat === undefined ? `Floor: ${list(body.cards)}` : `${name(body.seat)} gets ${list(body.cards)}`;
    case 'hidden_deal':
      return `${name(body.seat)} gets ${body.count} cards`;
    case 'floor_fixed':
      return `Floor fixed: ${list(body.returned)} back, ${list(body.replacements)} dealt`;
    case 'captured':
      return `${name(body.seat)} plays ${body.card} and takes ${list(body.cards)}`;
    case 'trailed':
      return `${name(body.seat)} plays ${body.card} and trails it`;
    case 'swept':
      return `${name(body.seat)} sweeps the floor with ${body.card}`;
    case 'basra_scored':
      return `BASRA for ${name(body.seat)}!`;
    case 'leftovers_awarded':
      return `Leftovers ${list(body.cards)} go to ${body.seat === undefined ? 'nobody' : name(body.seat)}`;
    case 'hand_scored':
      return `Hand ${body.hand_number} scored: ${body.seats
        .map((score, seat) => `${name(seat)} ${score.hand_total ?? 0} (total ${score.running_total ?? 0})`)
        .join(', ')}`;
    case 'match_over':
      return `${name(body.winner)} wins, ${(body.totals ?? []).join(' to ')}`;
    default:
      return null; // card_played: told by the capture or trail that follows it
  }
}

/** POST `body` as JSON; resolve to the answer, which holds `refusal` or `error` when refused. */
export async function post(path, body) {
  const response = await fetch(path, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return response.json();
}
