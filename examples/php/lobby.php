<?php

/*
 * A lobby in plain PHP (php-cli and php-curl, nothing else) that plays whole matches against
 * the rules service over HTTP/JSON: a person at seat 0 (a simple policy that sees only seat 0's
 * view) against the service's bot at seat 1. Each turn asks the seat to move for its own view,
 * chooses, and plays with expectedSeq; after the person's first move the same click is sent
 * again, stale, and refused with SEQ_MISMATCH. It prints one JSON line of what it did (exit 1
 * if a call failed or a match did not end), and with --record FILE writes every match's record.
 *
 *   php examples/php/lobby.php --gateway http://127.0.0.1:8080 --matches 2
 */

declare(strict_types=1);

namespace Basra\Lobby;

require_once __DIR__ . '/BasraMatch.php';

const PERSON = 0;
const BOT = 1;
/** Far more plays than any match takes (48 a hand). */
const MAX_PLAYS = 48 * 40;

/** The person's choice, from its own view alone: a Basra, else the plan that takes most
 *  cards, else the first card of the hand trailed. */
function choose(object $view): object
{
    $best = null;
    foreach ($view->legalMoves->moves as $move) {
        foreach ($move->plans ?? [] as $plan) {
            $worth = (($plan->basra ?? false) ? 100 : 0) + count($plan->cards);
            if ($best === null || $worth > $best[0]) {
                $best = [$worth, $move->card, $plan->id];
            }
        }
    }
    if ($best === null) {
        return (object) ['seat' => $view->seat ?? 0, 'card' => $view->legalMoves->moves[0]->card];
    }
    return (object) ['seat' => $view->seat ?? 0, 'card' => $best[1], 'planId' => $best[2]];
}

/**
 * Play one match to its end; return its record.
 *
 * @param array<string, int> $refused counts of the refusals handled, by reason
 * @return array<string, mixed>
 */
function playMatch(RulesClient $rules, string $seed, string $level, array &$refused): array
{
    [$match, $first] = BasraMatch::start($rules, $seed, ['php-person', 'php-bot']);
    // What each seat's player is sent: its own seat_events, in which the other seat's cards
    // are a hidden_deal (a count).
    $inbox = [$first->seatEvents[0]->events ?? [], $first->seatEvents[1]->events ?? []];
    $seqs = [];
    $clicked = false;
    for ($plays = 0; !$match->over(); $plays++) {
        if ($plays === MAX_PLAYS) {
            throw new \RuntimeException("$seed is not over after $plays plays");
        }
        $seat = $match->toMove();
        $view = $match->view($seat);
        $action = $seat === PERSON ? choose($view) : $match->suggest($seat, $level);
        try {
            $answer = $match->play($action, $view->seq ?? 0);
        } catch (Refusal $refusal) {
            if ($refusal->reason !== 'SEQ_MISMATCH') {
                throw $refusal;
            }
            // The match moved on meanwhile: count it, and choose again on a fresh view.
            $refused[$refusal->reason] = ($refused[$refusal->reason] ?? 0) + 1;
            continue;
        }
        $seqs[] = $answer->state->seq;
        foreach ($answer->seatEvents as $events) {
            array_push($inbox[$events->seat ?? 0], ...($events->events ?? []));
        }
        if ($seat === PERSON && !$clicked) {
            // The person clicks the same move again: the service refuses the stale seq, and the
            // match stays as it was.
            $clicked = true;
            try {
                $match->play($action, $view->seq ?? 0);
            } catch (Refusal $refusal) {
                // The service's answer (409), not the lobby's own guard after an Apply that
                // went through (no answer of its own).
                if ($refusal->reason !== 'SEQ_MISMATCH' || $refusal->httpStatus !== 409) {
                    throw $refusal;
                }
                $refused[$refusal->reason] = ($refused[$refusal->reason] ?? 0) + 1;
            }
        }
    }
    // Once it is over a seat's view reveals the seed: each player checks it against the
    // commitment every view showed from the first deal.
    $seedChecked = true;
    foreach ([PERSON, BOT] as $seat) {
        $view = $match->view($seat);
        $seedChecked = $seedChecked
            && hash('sha256', base64_decode($view->seed), true) === base64_decode($view->seedCommitment);
    }
    // The record `basra-rules verify` reads (with a seat and its inbox), and what the lobby saw.
    return [
        'seed' => $view->seed,
        'seedCommitment' => $view->seedCommitment,
        'actions' => $match->actions(),
        'seqs' => $seqs,
        'winner' => $match->state()->winner ?? 0,
        'totals' => array_map(static fn (object $seat): int => $seat->total ?? 0, $match->state()->seats),
        'seedChecked' => $seedChecked,
        'state' => $match->state(),
        'signedState' => $match->signed(),
        'inbox' => $inbox,
    ];
}

function main(): int
{
    $options = getopt('', ['gateway:', 'service-config:', 'matches:', 'seed:', 'level:', 'record:']);
    $gateway = $options['gateway'] ?? 'http://127.0.0.1:8080';
    $config = $options['service-config'] ?? __DIR__ . '/../../deploy/grpc-service-config.json';
    $matches = (int) ($options['matches'] ?? 1);
    $seed = $options['seed'] ?? 'php-lobby';
    $level = $options['level'] ?? 'BOT_LEVEL_GREEDY';
    $rules = new RulesClient(rtrim($gateway, '/'), $config);
    $summary = ['matches' => $matches, 'finished' => 0, 'calls' => 0, 'refused' => []];
    $records = [];
    try {
        for ($i = 0; $i < $matches; $i++) {
            $records[] = playMatch($rules, "$seed-$i", $level, $summary['refused']);
            $summary['finished']++;
        }
    } catch (\Throwable $error) {
        $reason = $error instanceof Refusal ? "{$error->status} {$error->reason}: " : '';
        $summary['error'] = $reason . $error->getMessage();
    }
    $summary['calls'] = $rules->attempts;
    $summary['refused'] = (object) $summary['refused'];
    if (isset($options['record'])) {
        file_put_contents($options['record'], json_encode($records, JSON_THROW_ON_ERROR | JSON_UNESCAPED_SLASHES));
    }
    echo json_encode($summary, JSON_THROW_ON_ERROR | JSON_UNESCAPED_SLASHES), "\n";
    return isset($summary['error']) || $summary['finished'] !== $matches ? 1 : 0;
}

exit(main());
