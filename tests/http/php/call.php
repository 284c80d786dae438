<?php

// One call through the PHP lobby's client, for tests/http/test_http_php_lobby.py:
// php call.php BASE_URL METHOD REQUEST_JSON SERVICE_CONFIG [DEADLINE_SECONDS] prints
// {"answer": ...} or {"refusal": {...}}, and "attempts", the HTTP requests the client sent.

declare(strict_types=1);

require_once __DIR__ . '/../../../examples/php/RulesClient.php';

use Basra\Lobby\Refusal;
use Basra\Lobby\RulesClient;

[, $base, $method, $request, $config] = $argv;
$rules = new RulesClient($base, $config, (float) ($argv[5] ?? RulesClient::DEADLINE_SECONDS));
try {
    $out = ['answer' => $rules->call($method, json_decode($request, false, 512, JSON_THROW_ON_ERROR))];
} catch (Refusal $refusal) {
    $out = ['refusal' => [
        'status' => $refusal->status,
        'reason' => $refusal->reason,
        'message' => $refusal->getMessage(),
        'metadata' => (object) $refusal->metadata,
        'httpStatus' => $refusal->httpStatus,
        'retryDelay' => $refusal->retryDelay,
    ]];
}
$out['attempts'] = $rules->attempts;
echo json_encode($out, JSON_THROW_ON_ERROR | JSON_UNESCAPED_SLASHES), "\n";
