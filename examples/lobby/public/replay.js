// Step through a match record forwards and backwards. The lobby plays the record's actions
// again through the rules service (POST /api/replay) and returns one step per action, each
// with the events it caused and the table after it; the record holds the seed, so the match
// is over and both hands are shown.

import { describe, post, showCards } from './cards.js';

const $ = (id) => document.getElementById(id);
let steps = [];
let at = 0;

const names = (table) => table.seats.map((seat, index) => seat.label || `seat ${index}`);

function renderSeat(table, index) {
  const seat = table.seats[index];
  const heading = document.createElement('h2');
  heading.textContent = `${names(table)[index]}${table.to_move === index ? ' ▸ to move' : ''}`;
  const hand = document.createElement('div');
  hand.className = 'cards';
  showCards(hand, seat.hand);
  const facts = document.createElement('p');
  facts.className = 'facts';
  facts.textContent = `pile ${seat.captured_count} cards · Basras ${seat.basras} · total ${seat.total}`;
  $(`seat-${index}`).replaceChildren(heading, hand, facts);
}

function render() {
  const { action, events, table } = steps[at];
  document.body.dataset.step = at;
  $('step').textContent = `step ${at} of ${steps.length - 1}`;
  const how = action?.plan_id ? ` (plan ${action.plan_id})` : action?.trail ? ' (trail)' : '';
  $('action').textContent = action ? `${names(table)[action.seat]} plays ${action.card}${how}` : 'The deal';
  $('action').dataset.card = action?.card ?? '';
  $('deck').textContent = `deck ${table.deck_size} · carry ${table.carry} · hand ${table.hand_number}`;
  showCards($('floor'), table.floor);
  renderSeat(table, 0);
  renderSeat(table, 1);
  $('events').replaceChildren(
    ...events
      .map((event) => describe(event, names(table)))
      .filter(Boolean)
      .map((text) => Object.assign(document.createElement('li'), { textContent: text })),
  );
  $('back').disabled = $('first').disabled = at === 0;
  $('forward').disabled = $('last').disabled = at === steps.length - 1;
}

function go(step) {
  if (!steps.length) return;
  at = Math.max(0, Math.min(steps.length - 1, step));
  render();
}

$('record').addEventListener('change', async () => {
  const [file] = $('record').files;
  let record;
  try {
    record = JSON.parse(await file.text());
  } catch {
    record = null;
  }
  const answer = record ? await post('/api/replay', record) : { error: 'the file is not JSON' };
  const problem = answer.error ?? answer.refusal?.message ?? null;
  $('problem').hidden = !problem && answer.commitmentMatches !== false;
  $('problem').textContent = problem
    ? `Cannot replay: ${problem}`
    : answer.commitmentMatches === false
      ? 'The seed does not match the record’s commitment.'
      : '';
  if (answer.refusal?.reason) $('problem').textContent = `Action ${answer.refusal.index + 1} refused: ${answer.refusal.reason}. ${answer.refusal.message}`;
  steps = answer.steps ?? [];
  $('commitment').textContent = answer.commitment ? `Seed commitment (SHA-256, base64): ${answer.commitment}` : '';
  go(0);
});
$('first').addEventListener('click', () => go(0));
$('back').addEventListener('click', () => go(at - 1));
$('forward').addEventListener('click', () => go(at + 1));
$('last').addEventListener('click', () => go(steps.length - 1));
document.addEventListener('keydown', (key) => {
  const moves = { ArrowLeft: at - 1, ArrowRight: at + 1, Home: 0, End: steps.length - 1 };
  if (key.key in moves) go(moves[key.key]);
});
