<?php

declare(strict_types=1);

namespace Basra\Lobby;

require_once __DIR__ . '/Refusal.php';

/**
 * The rules service over HTTP/JSON, through its gateway: every RPC is
 * POST /basra.v1.RulesService/<Method> with the request in proto3 JSON, and the answer is the
 * response in proto3 JSON (200) or a google.rpc.Status (any other status), thrown as a Refusal.
 * Every call has a deadline (the Grpc-Timeout header, which the gateway turns into the gRPC
 * call's deadline) and is retried by the published retry policy, read from the service config
 * file: every RPC is a pure function of its request (Apply changes nothing on the server), so
 * sending one again is always safe.
 */
final class RulesClient
{
    /** Each call's deadline, retries included: a second suits every RPC at the default budget. */
    public const DEADLINE_SECONDS = 5.0;
    /** The published keepalive (docs/integration.md, "Client settings"), as TCP keepalive. */
    private const KEEPALIVE_IDLE_SECONDS = 10;
    private const KEEPALIVE_INTERVAL_SECONDS = 1;

    private readonly \CurlHandle $curl;
    /** @var array{maxAttempts: int, initialBackoff: float, maxBackoff: float, backoffMultiplier: float, retryableStatusCodes: list<string>} */
    private readonly array $policy;
    private readonly float $maxTokens;
    private readonly float $tokenRatio;
    /** gRPC's retry throttle (gRFC A6): retries stop while most calls fail. */
    private float $tokens;
    /** Every HTTP request sent, retries included. */
    public int $attempts = 0;

    /**
     * @param string $baseUrl the gateway, such as http://127.0.0.1:8080
     * @param string $serviceConfig deploy/grpc-service-config.json: its retry policy and throttle
     */
    public function __construct(
        private readonly string $baseUrl,
        string $serviceConfig,
        private readonly float $deadline = self::DEADLINE_SECONDS,
    ) {
        $config = json_decode((string) file_get_contents($serviceConfig), false, 64, JSON_THROW_ON_ERROR);
        $retry = $config->methodConfig[0]->retryPolicy;
        $seconds = static fn (string $duration): float => (float) rtrim($duration, 's');
        $this->policy = [
            'maxAttempts' => (int) $retry->maxAttempts,
            'initialBackoff' => $seconds($retry->initialBackoff),
            'maxBackoff' => $seconds($retry->maxBackoff),
            'backoffMultiplier' => (float) $retry->backoffMultiplier,
            'retryableStatusCodes' => $retry->retryableStatusCodes,
        ];
        $this->maxTokens = (float) $config->retryThrottling->maxTokens;
        $this->tokenRatio = (float) $config->retryThrottling->tokenRatio;
        $this->tokens = $this->maxTokens;
        // One handle for every call: curl keeps the connection open between them.
        $this->curl = curl_init();
        curl_setopt_array($this->curl, [
            CURLOPT_POST => true,
            CURLOPT_RETURNTRANSFER => true,
            CURLOPT_TCP_KEEPALIVE => 1,
            CURLOPT_TCP_KEEPIDLE => self::KEEPALIVE_IDLE_SECONDS,
            CURLOPT_TCP_KEEPINTVL => self::KEEPALIVE_INTERVAL_SECONDS,
        ]);
    }

    /**
     * Call $method (NewMatch, Apply, PlayerView, SuggestMove, ...) with $request, an array or
     * object that encodes to the request message's proto3 JSON; return the response message.
     *
     * @param array<string, mixed>|object $request
     * @throws Refusal
     */
    public function call(string $method, array|object $request): object
    {
        $body = json_encode((object) $request, JSON_THROW_ON_ERROR | JSON_UNESCAPED_SLASHES);
        $deadline = hrtime(true) / 1e9 + $this->deadline;
        $backoff = $this->policy['initialBackoff'];
        for ($attempt = 1;; $attempt++) {
            $remaining = $deadline - hrtime(true) / 1e9;
            try {
                if ($remaining <= 0) {
                    throw Refusal::noAnswer('DEADLINE_EXCEEDED', "$method: the deadline passed");
                }
                $answer = $this->post($method, $body, $remaining);
                $this->tokens = min($this->maxTokens, $this->tokens + $this->tokenRatio);
                return $answer;
            } catch (Refusal $refusal) {
                if (!$this->retryable($refusal)) {
                    throw $refusal;
                }
                $this->tokens = max(0.0, $this->tokens - 1);
                // The server's delay when it gives one, else exponential backoff with jitter.
                $pause = $refusal->retryDelay ?? $backoff * mt_rand() / mt_getrandmax();
                $backoff = min($backoff * $this->policy['backoffMultiplier'], $this->policy['maxBackoff']);
                $late = hrtime(true) / 1e9 + $pause >= $deadline;
                if ($attempt >= $this->policy['maxAttempts'] || $this->tokens <= $this->maxTokens / 2 || $late) {
                    throw $refusal;
                }
                usleep((int) ($pause * 1e6));
            }
        }
    }

    /** Whether the policy retries this refusal. RESOURCE_EXHAUSTED only with the server's
     *  RetryInfo (OVERLOADED): the others of that code would be refused again the same way. */
    private function retryable(Refusal $refusal): bool
    {
        if (!in_array($refusal->status, $this->policy['retryableStatusCodes'], true)) {
            return false;
        }
        return $refusal->status !== 'RESOURCE_EXHAUSTED' || $refusal->retryInfo;
    }

    /** One HTTP request, bounded by $seconds: the gateway's gRPC call gets the same deadline. */
    private function post(string $method, string $body, float $seconds): object
    {
        $milliseconds = max(1, (int) ($seconds * 1000));
        $retryAfter = null;
        curl_setopt_array($this->curl, [
            CURLOPT_URL => "{$this->baseUrl}/basra.v1.RulesService/$method",
            CURLOPT_POSTFIELDS => $body,
            CURLOPT_HTTPHEADER => [
                'Content-Type: application/json',
                "Grpc-Timeout: {$milliseconds}m",
                // No "Expect: 100-continue" round trip before a large body.
                'Expect:',
            ],
            // The gateway answers DEADLINE_EXCEEDED itself at the deadline; curl gives up a
            // little later, when even that answer did not come.
            CURLOPT_TIMEOUT_MS => $milliseconds + 500,
            CURLOPT_HEADERFUNCTION => static function ($curl, string $line) use (&$retryAfter): int {
                if (stripos($line, 'retry-after:') === 0) {
                    $retryAfter = (float) trim(substr($line, strlen('retry-after:')));
                }
                return strlen($line);
            },
        ]);
        $this->attempts++;
        $text = curl_exec($this->curl);
        if ($text === false) {
            $error = curl_errno($this->curl);
            $status = $error === CURLE_OPERATION_TIMEDOUT ? 'DEADLINE_EXCEEDED' : 'UNAVAILABLE';
            throw Refusal::noAnswer($status, "$method: " . curl_error($this->curl));
        }
        $httpStatus = curl_getinfo($this->curl, CURLINFO_RESPONSE_CODE);
        if ($httpStatus !== 200) {
            throw Refusal::fromAnswer($httpStatus, (string) $text, $retryAfter);
        }
        return json_decode((string) $text, false, 512, JSON_THROW_ON_ERROR);
    }
}
