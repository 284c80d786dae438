// The rules service as the lobby sees it: one gRPC channel, the contract loaded at run time
// from the repository's proto/ (nothing generated), the published retry policy, a deadline on
// every call, and refusals turned into { reason, message, metadata }.

import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import grpc from '@grpc/grpc-js';
import protoLoader from '@grpc/proto-loader';
import protobuf from 'protobufjs';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const REPO = path.resolve(HERE, '..', '..');
export const DEFAULT_PROTO_DIR = path.join(REPO, 'proto');
export const DEFAULT_SERVICE_CONFIG = path.join(REPO, 'deploy', 'grpc-service-config.json');
const CALL_DEADLINE_MS = 10000;
// The published client keepalive (docs/integration.md, "Client settings"): ping every 10 s,
// drop the connection when no answer comes within 1 s, idle or not. Without it a server lost
// without a reset keeps its share of the calls for as long as Linux keeps the connection
// (about 15 minutes). grpc-js pings on a fixed 10 s timer and cannot set TCP_USER_TIMEOUT, so
// it notices such a loss 1 to 11 s after it.
export const KEEPALIVE_OPTIONS = {
  'grpc.keepalive_time_ms': 10000,
  'grpc.keepalive_timeout_ms': 1000,
  'grpc.keepalive_permit_without_calls': 1,
};

// A refusal's reason travels as a google.rpc.Status with one google.rpc.ErrorInfo detail in the
// `grpc-status-details-bin` trailer. Only the fields read here are declared.
const ERROR_TYPES = protobuf.Root.fromJSON({
  nested: {
    google: {
      nested: {
        protobuf: {
          nested: { Any: { fields: { type_url: { type: 'string', id: 1 }, value: { type: 'bytes', id: 2 } } } },
        },
        rpc: {
          nested: {
            Status: {
              fields: {
                code: { type: 'int32', id: 1 },
                message: { type: 'string', id: 2 },
                details: { rule: 'repeated', type: 'google.protobuf.Any', id: 3 },
              },
            },
            ErrorInfo: {
              fields: {
                reason: { type: 'string', id: 1 },
                domain: { type: 'string', id: 2 },
                metadata: { keyType: 'string', type: 'string', id: 3 },
              },
            },
          },
        },
      },
    },
  },
});
const RpcStatus = ERROR_TYPES.lookupType('google.rpc.Status');
const ErrorInfo = ERROR_TYPES.lookupType('google.rpc.ErrorInfo');

/** A call the rules service answered with an error status, with its stable reason code. */
export class Refusal extends Error {
  constructor(error) {
    super(error.details || error.message);
    this.code = error.code;
    this.status = grpc.status[error.code] ?? String(error.code);
    const info = errorInfo(error);
    // No ErrorInfo: the status came from gRPC itself (UNAVAILABLE, DEADLINE_EXCEEDED, ...).
    this.reason = info?.reason ?? this.status;
    this.metadata = info?.metadata ?? {};
  }

  toJSON() {
    return { reason: this.reason, status: this.status, message: this.message, metadata: this.metadata };
  }
}

function errorInfo(error) {
  const [raw] = error.metadata?.get('grpc-status-details-bin') ?? [];
  if (!raw) return null;
  const detail = RpcStatus.decode(raw).details.find((any) => any.type_url.endsWith('/google.rpc.ErrorInfo'));
  return detail ? ErrorInfo.toObject(ErrorInfo.decode(detail.value)) : null;
}

export function loadService(protoDir = DEFAULT_PROTO_DIR) {
  const definition = protoLoader.loadSync(path.join('basra', 'v1', 'rules.proto'), {
    includeDirs: [protoDir],
    // snake_case names as in the .proto; unset fields stay absent (an optional seat keeps its
    // presence), enums as their names, bytes as Buffers that go back unchanged.
    keepCase: true,
    defaults: false,
    arrays: true,
    oneofs: true,
    enums: String,
    longs: Number,
    bytes: Buffer,
  });
  return grpc.loadPackageDefinition(definition).basra.v1.RulesService;
}

/**
 * Connect to the rules service at `address` ("host:port"), with the published keepalive. The
 * channel retries UNAVAILABLE, CANCELLED (a pod stopping) and RESOURCE_EXHAUSTED with backoff
 * as the service config file says; every RPC is pure, so retrying any of them is safe. Each
 * call's deadline is `deadlineMs`.
 */
export function connect(
  address,
  { protoDir = DEFAULT_PROTO_DIR, serviceConfig = DEFAULT_SERVICE_CONFIG, deadlineMs = CALL_DEADLINE_MS } = {},
) {
  const RulesService = loadService(protoDir);
  const config = fs.readFileSync(serviceConfig, 'utf8');
  const client = new RulesService(address, grpc.credentials.createInsecure(), {
    ...KEEPALIVE_OPTIONS,
    'grpc.service_config': JSON.stringify(JSON.parse(config)),
  });
  const call = (method, request) =>
    new Promise((resolve, reject) => {
      const deadline = new Date(Date.now() + deadlineMs);
      client[method](request, { deadline }, (error, response) =>
        error ? reject(new Refusal(error)) : resolve(response),
      );
    });
  return {
    newMatch: (request) => call('NewMatch', request),
    apply: (request) => call('Apply', request),
    playerView: (request) => call('PlayerView', request),
    suggestMove: (request) => call('SuggestMove', request),
    close: () => client.close(),
  };
}
