// The lobby's front page: start a match, list the matches to watch.

import { post } from './cards.js';

const $ = (id) => document.getElementById(id);
const seatLink = (id, seat, token) => `table.html?match=${id}&seat=${seat}&token=${token}`;

$('new').addEventListener('submit', async (submit) => {
  submit.preventDefault();
  const opponent = $('opponent').value;
  const answer = await post('/api/matches', {
    name: $('name').value,
    opponent,
    difficulty: $('difficulty').value,
    turnSeconds: Number($('turn').value),
  });
  if (answer.error || answer.refusal) {
    $('links').textContent = answer.error ?? `Refused: ${answer.refusal.reason}. ${answer.refusal.message}`;
    return;
  }
  const [mine, theirs] = answer.seats;
  if (opponent === 'bot') {
    location.href = seatLink(answer.id, 0, mine);
    return;
  }
  $('links').innerHTML = '';
  for (const [seat, token] of [[0, mine], [1, theirs]]) {
    const link = document.createElement('a');
    link.href = seatLink(answer.id, seat, token);
    link.textContent = `seat ${seat}`;
    link.target = '_blank';
    $('links').append(link, ' ');
  }
});

async function refresh() {
  const { matches } = await (await fetch('/api/matches')).json();
  $('matches').replaceChildren(
    ...matches.map((match) => {
      const item = document.createElement('li');
      const link = document.createElement('a');
      link.href = `table.html?match=${match.id}`;
      link.textContent = 'watch';
      const over = match.status === 'STATUS_OVER' ? ', over' : '';
      item.append(`${match.labels.join(' vs ')} (move ${match.seq}${over}) `, link);
      return item;
    }),
  );
}
refresh();
setInterval(refresh, 3000);
