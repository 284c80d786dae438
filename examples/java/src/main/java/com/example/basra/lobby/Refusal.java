package com.example.basra.lobby;

import com.google.protobuf.Any;
import com.google.protobuf.InvalidProtocolBufferException;
import com.google.rpc.ErrorInfo;
import com.google.rpc.RetryInfo;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.protobuf.StatusProto;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Optional;

/** A call the rules service answered with an error status, with its stable reason code. */
public final class Refusal extends RuntimeException {
  private static final long serialVersionUID = 1L;

  private final Status.Code code;
  private final String reason;
  private final Map<String, String> metadata;
  private final Duration retryDelay;

  private Refusal(
      StatusRuntimeException error,
      String reason,
      Map<String, String> metadata,
      Duration retryDelay) {
    super(error.getStatus().getDescription(), error);
    this.code = error.getStatus().getCode();
    this.reason = reason;
    this.metadata = metadata;
    this.retryDelay = retryDelay;
  }

  /** The refusal an error status carries: its ErrorInfo and, when overloaded, its RetryInfo. */
  static Refusal of(StatusRuntimeException error) {
    ErrorInfo info = null;
    Duration retryDelay = null;
    com.google.rpc.Status status = StatusProto.fromThrowable(error);
    List<Any> details = status == null ? List.of() : status.getDetailsList();
    for (Any detail : details) {
      try {
        if (detail.is(ErrorInfo.class)) {
          info = detail.unpack(ErrorInfo.class);
        } else if (detail.is(RetryInfo.class)) {
          com.google.protobuf.Duration delay = detail.unpack(RetryInfo.class).getRetryDelay();
          retryDelay = Duration.ofSeconds(delay.getSeconds(), delay.getNanos());
        }
      } catch (InvalidProtocolBufferException malformed) {
        // A detail that does not parse tells nothing: the status code still does.
      }
    }
    if (info == null) {
      // No ErrorInfo: the status came from gRPC itself (UNAVAILABLE, DEADLINE_EXCEEDED, ...).
      return new Refusal(error, error.getStatus().getCode().name(), Map.of(), retryDelay);
    }
    return new Refusal(error, info.getReason(), Map.copyOf(info.getMetadataMap()), retryDelay);
  }

  /** The gRPC status code (ABORTED, UNAUTHENTICATED, RESOURCE_EXHAUSTED, ...). */
  public Status.Code code() {
    return code;
  }

  /** The stable reason code (SEQ_MISMATCH, MUST_CAPTURE, ...; docs/service.md), or the
   *  status code's name when gRPC itself ended the call. */
  public String reason() {
    return reason;
  }

  /** The values involved, by name (seq, expectedSeq, card, ...). */
  public Map<String, String> metadata() {
    return metadata;
  }

  /** How long to wait before trying again, when the service said (OVERLOADED). */
  public Optional<Duration> retryDelay() {
    return Optional.ofNullable(retryDelay);
  }
}
