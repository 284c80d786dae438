<?php

declare(strict_types=1);

namespace Basra\Lobby;

require_once __DIR__ . '/RulesClient.php';

/**
 * One match as a lobby keeps it. The service keeps nothing between calls: the lobby stores the
 * state of the last answer (to read: seq, whose turn, status; it holds the seed and both hands,
 * so it never reaches a player) and, when the service signs, the signed state of that answer,
 * which goes back exactly as it came. Both stay the decoded proto3 JSON of the answer: nothing
 * rebuilds them from their fields.
 */
final class BasraMatch
{
    /** @var list<object> the actions applied, in order: with the seed, the match's record */
    private array $actions = [];

    private function __construct(
        private readonly RulesClient $rules,
        private object $state,
        private ?object $signed,
    ) {
    }

    /**
     * Start a match dealt from $seed (empty: the server draws one), seat 0 and seat 1 labelled.
     *
     * @param list<string> $labels
     * @return array{0: self, 1: object} the match and NewMatch's answer
     */
    public static function start(RulesClient $rules, string $seed, array $labels): array
    {
        // bytes travel as base64 in proto3 JSON.
        $answer = $rules->call('NewMatch', ['seed' => base64_encode($seed), 'labels' => $labels]);
        return [new self($rules, $answer->state, $answer->signedState ?? null), $answer];
    }

    /** The number of actions applied (proto3 JSON leaves a 0 out). */
    public function seq(): int
    {
        return $this->state->seq ?? 0;
    }

    /** The seat to move; null once the match is over (an unset optional seat). */
    public function toMove(): ?int
    {
        return $this->state->toMove ?? null;
    }

    public function over(): bool
    {
        return $this->state->status === 'STATUS_OVER';
    }

    /** The state of the last answer, to read (never to show a player). */
    public function state(): object
    {
        return $this->state;
    }

    /** The signed state of the last answer (null when the service does not sign). */
    public function signed(): ?object
    {
        return $this->signed;
    }

    /** @return list<object> */
    public function actions(): array
    {
        return $this->actions;
    }

    /** What $seat may see of the match (its own hand, never the other's): safe to send to that
     *  seat's player. */
    public function view(int $seat): object
    {
        return $this->rules->call('PlayerView', $this->carrying(['seat' => $seat]))->view;
    }

    /** The bot's action for $seat at $level (BOT_LEVEL_RANDOM, _GREEDY, _STRONG), chosen from
     *  what that seat may see, ready to be played unchanged. */
    public function suggest(int $seat, string $level): object
    {
        return $this->rules->call('SuggestMove', $this->carrying(['seat' => $seat, 'level' => $level]))->action;
    }

    /**
     * Apply $action, chosen on the view whose seq was $seq. With expectedSeq, the service refuses
     * it (ABORTED, reason SEQ_MISMATCH) if the match has moved on since: a second click, a turn
     * timer that played first. The answer is stored only over the state the call was made on
     * (with a database: UPDATE ... WHERE id = ? AND seq = ?).
     */
    public function play(object $action, int $seq): object
    {
        $answer = $this->rules->call('Apply', $this->carrying(['action' => $action, 'expectedSeq' => $seq]));
        if ($this->seq() !== $seq) {
            throw new Refusal('ABORTED', 'SEQ_MISMATCH', 'Another action was played first.');
        }
        $this->state = $answer->state;
        $this->signed = $answer->signedState ?? null;
        $this->actions[] = $action;
        return $answer;
    }

    /**
     * A request carrying the match: the signed state as it came when the service signs, else
     * the plain state, and $fields.
     *
     * @param array<string, mixed> $fields
     * @return array<string, mixed>
     */
    private function carrying(array $fields): array
    {
        $carried = $this->signed !== null ? ['signedState' => $this->signed] : ['state' => $this->state];
        return $carried + $fields;
    }
}
