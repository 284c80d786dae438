// The table: a seat's page (table.html?match=ID&seat=N&token=T) or a spectator's
// (table.html?match=ID, no seat). Everything shown comes from the lobby's updates: the view it got from
// PlayerView for this seat (or the public view for spectators) and the events this audience
// may see.

import { cardElement, describe, levelName, post, showCards } from './cards.js';

const params = new URLSearchParams(location.search);
const matchId = params.get('match');
const seat = params.has('seat') ? Number(params.get('seat')) : null;
const token = params.get('token');
const $ = (id) => document.getElementById(id);
if (seat === null) document.title = 'Basra: watching a match';

let view = null;
let deadline = null;
let selected = null; // the card chosen in the hand

const names = () => (view?.seats ?? []).map((s, i) => s.label || `seat ${i}`);

function onUpdate(message) {
  // Updates arrive in order; a view older than the one shown is never drawn.
  const before = view?.seq ?? -1;
  if (message.view && (!view || (message.view.seq ?? 0) >= (view.seq ?? 0))) view = message.view;
  deadline = message.deadline;
  let play = null; // the line of this update's play, which a note explains
  for (const event of message.events) {
    const line = addEvent(describe(event, names()));
    if (event.kind === 'captured' || event.kind === 'trailed') play = line;
  }
  if (message.note) explain(message.note, play);
  if (!view) return;
  if ((view.seq ?? 0) !== before) {
    // A new position: the last hint and refusal were about the old one.
    showRefusal(null);
    $('hint-text').textContent = '';
  }
  if (selected && !(view.hand ?? []).includes(selected)) selected = null;
  render();
}

function addEvent(text) {
  if (!text) return null;
  const item = document.createElement('li');
  item.textContent = text;
  $('events').prepend(item);
  return item;
}

// Why a bot played what it played, or that the turn timer played for a seat.
function explain(note, play) {
  const who = names()[note.seat];
  if (note.timeout !== undefined) {
    addEvent(`Time ran out for ${who}: the ${levelName(note.level)} bot played (${note.reason})`);
  } else if (play) {
    play.append(` (${note.reason})`);
  }
}

function renderSeat(index) {
  const info = view.seats[index];
  const element = $(`seat-${index}`);
  const turn = view.to_move === index ? ' to-move' : '';
  element.className = `seat${turn}${index === seat ? ' mine' : ''}`;
  const backs = Array.from({ length: info.hand_size ?? 0 }, () => cardElement(null));
  const heading = document.createElement('h2');
  heading.textContent = `${names()[index]}${index === seat ? ' (you)' : ''}${view.to_move === index ? ' ▸ to move' : ''}`;
  const facts = document.createElement('p');
  facts.className = 'facts';
  facts.dataset.seat = index;
  facts.textContent =
    `pile ${info.captured_count ?? 0} cards · Basras ${info.basras ?? 0} · total ${info.total ?? 0}`;
  // The own hand is drawn below, with its controls; the other hand only as card backs.
  const hand = document.createElement('div');
  hand.className = 'cards';
  hand.append(...backs);
  element.replaceChildren(...(index === seat ? [heading, facts] : [heading, hand, facts]));
}

function movesOf(card) {
  return view.legal_moves?.moves?.find((move) => move.card === card) ?? null;
}

function planButton(label, action, floorCards) {
  const button = document.createElement('button');
  button.textContent = label;
  button.addEventListener('click', () => play(action));
  // Pointing at a plan shows which floor cards it takes.
  const mark = (on) => {
    for (const element of $('floor').children) {
      element.classList.toggle('taken', on && floorCards.includes(element.dataset.card));
    }
  };
  button.addEventListener('mouseenter', () => mark(true));
  button.addEventListener('mouseleave', () => mark(false));
  button.addEventListener('focus', () => mark(true));
  button.addEventListener('blur', () => mark(false));
  return button;
}

function renderPlans() {
  const plans = $('plans');
  plans.replaceChildren();
  if (!selected) return;
  const move = movesOf(selected);
  for (const plan of move?.plans ?? []) {
    const extra = [plan.basra ? 'Basra!' : '', plan.sweep ? 'sweep' : ''].filter(Boolean).join(', ');
    const label = `Take ${plan.cards.join(' ')}${extra ? ` (${extra})` : ''}`;
    const button = planButton(label, { card: selected, plan_id: plan.id }, plan.cards);
    button.dataset.plan = plan.id;
    plans.append(button);
  }
  // Trailing is always offered: the rules service decides (a card that captures must capture).
  const trail = planButton(move ? `Trail ${selected}` : `Play ${selected}`, move ? { card: selected, trail: true } : { card: selected }, []);
  trail.id = 'trail';
  plans.append(trail);
}

function render() {
  document.body.dataset.seq = view.seq ?? 0;
  document.body.dataset.status = view.status;
  const over = view.status === 'STATUS_OVER';
  document.body.dataset.turn = over ? 'over' : view.to_move === seat ? 'mine' : 'theirs';
  $('title').textContent = `Hand ${view.hand_number} · round ${view.round_number ?? 0} · move ${view.seq ?? 0}`;
  $('status').textContent = over
    ? `${names()[view.winner ?? 0]} wins ${view.seats.map((s) => s.total ?? 0).join(' to ')}`
    : seat === null
      ? 'Watching'
      : '';
  $('deck').textContent = `deck ${view.deck_size ?? 0} · carry ${view.carry ?? 0}`;
  showCards($('floor'), view.floor ?? []);
  renderSeat(0);
  renderSeat(1);
  $('commitment').textContent = view.seed_commitment ?? '';
  $('seed').hidden = !view.seed;
  $('seed').querySelector('code').textContent = view.seed ?? '';
  if (seat === null) return;
  $('controls').hidden = false;
  const hand = $('hand');
  hand.replaceChildren(
    ...(view.hand ?? []).map((code) => {
      const element = cardElement(code, 'button');
      element.dataset.plans = movesOf(code)?.plans?.length ?? 0;
      element.classList.toggle('selected', code === selected);
      element.addEventListener('click', () => {
        selected = code;
        render();
      });
      return element;
    }),
  );
  renderPlans();
}

async function play(action) {
  const answer = await post(`/api/matches/${matchId}/play`, { seat, token, seq: view.seq ?? 0, ...action });
  showRefusal(answer.refusal ?? (answer.error ? { reason: 'LOBBY', message: answer.error } : null));
  if (!answer.refusal && !answer.error) selected = null;
  render();
}

function showRefusal(refusal) {
  const element = $('refusal');
  element.hidden = !refusal;
  element.dataset.reason = refusal?.reason ?? '';
  element.textContent = refusal ? `Refused: ${refusal.reason}. ${refusal.message}` : '';
}

async function hint() {
  const level = $('hint-level').value;
  const answer = await post(`/api/matches/${matchId}/hint`, { seat, token, level });
  if (answer.refusal || answer.error) {
    $('hint-text').textContent = `No hint: ${answer.refusal?.reason ?? answer.error}`;
    return;
  }
  const { action } = answer;
  const how = action.plan_id ? `, plan ${action.plan_id}` : '';
  $('hint-text').textContent = `${levelName(answer.level)} suggests ${action.card}${how} (${answer.reason})`;
  $('hint-text').dataset.card = action.card;
  selected = action.card;
  render();
}

function tick() {
  const left = deadline ? Math.max(0, Math.ceil((deadline - Date.now()) / 1000)) : null;
  $('timer').textContent = left === null ? '' : `${names()[view?.to_move ?? 0]}: ${left} s left`;
}

$('hint').addEventListener('click', hint);
setInterval(tick, 250);
const query = seat === null ? '' : `?seat=${seat}&token=${encodeURIComponent(token)}`;
new EventSource(`/api/matches/${matchId}/events${query}`).onmessage = (message) =>
  onUpdate(JSON.parse(message.data));
