<?php

declare(strict_types=1);

namespace Basra\Lobby;

/**
 * A call the rules service (or the way to it) did not answer with 200: its google.rpc.Status
 * code, the stable reason code of its google.rpc.ErrorInfo, and that detail's metadata.
 * Decide by the reason, never by the message (that one is English for people).
 */
final class Refusal extends \RuntimeException
{
    /** google.rpc.Code names, indexed by their numbers. */
    public const CODES = [
        'OK', 'CANCELLED', 'UNKNOWN', 'INVALID_ARGUMENT', 'DEADLINE_EXCEEDED', 'NOT_FOUND',
        'ALREADY_EXISTS', 'PERMISSION_DENIED', 'RESOURCE_EXHAUSTED', 'FAILED_PRECONDITION',
        'ABORTED', 'OUT_OF_RANGE', 'UNIMPLEMENTED', 'INTERNAL', 'UNAVAILABLE', 'DATA_LOSS',
        'UNAUTHENTICATED',
    ];

    /**
     * @param array<string, string> $metadata
     */
    public function __construct(
        /** The google.rpc.Code name: ABORTED, UNAVAILABLE, ... */
        public readonly string $status,
        /** The ErrorInfo reason (SEQ_MISMATCH, NOT_YOUR_TURN, ...); the status name without one. */
        public readonly string $reason,
        string $message,
        /** The values involved, as the ErrorInfo names them (seq, expectedSeq, card, ...). */
        public readonly array $metadata = [],
        /** The HTTP status of the answer (0: no answer came). */
        public readonly int $httpStatus = 0,
        /** Seconds after which the same call may succeed (RetryInfo, else Retry-After); null: no hint. */
        public readonly ?float $retryDelay = null,
        /** Whether the answer carried a google.rpc.RetryInfo: the server says to try again. */
        public readonly bool $retryInfo = false,
    ) {
        parent::__construct($message);
    }

    /** The refusal an HTTP answer carries: its body is a google.rpc.Status in proto3 JSON. */
    public static function fromAnswer(int $httpStatus, string $body, ?float $retryAfter): self
    {
        $status = json_decode($body, false);
        if (!is_object($status) || !isset($status->code)) {
            // Not the gateway's JSON (a proxy's page): gRPC's own mapping of HTTP statuses.
            $code = match ($httpStatus) {
                400 => 'INTERNAL',
                401 => 'UNAUTHENTICATED',
                403 => 'PERMISSION_DENIED',
                404 => 'UNIMPLEMENTED',
                429, 502, 503, 504 => 'UNAVAILABLE',
                default => 'UNKNOWN',
            };
            return new self($code, $code, "HTTP $httpStatus", [], $httpStatus, $retryAfter);
        }
        $name = self::CODES[$status->code] ?? 'UNKNOWN';
        $reason = $name;
        $metadata = [];
        $delay = null;
        foreach ($status->details ?? [] as $detail) {
            $type = $detail->{'@type'} ?? '';
            if ($type === 'type.googleapis.com/google.rpc.ErrorInfo') {
                $reason = $detail->reason ?? $name;
                $metadata = (array) ($detail->metadata ?? []);
            } elseif ($type === 'type.googleapis.com/google.rpc.RetryInfo') {
                // A Duration in proto3 JSON: seconds with an "s", such as "0.250s".
                $delay = (float) rtrim($detail->retryDelay ?? '0s', 's');
            }
        }
        $message = $status->message ?? $name;
        return new self($name, $reason, $message, $metadata, $httpStatus, $delay ?? $retryAfter, $delay !== null);
    }

    /** A call that got no answer: the gateway unreachable, the connection lost, the deadline. */
    public static function noAnswer(string $status, string $message): self
    {
        return new self($status, $status, $message);
    }
}
