// Starting `basra-rules serve` for the grpc-js tests, and what they share: the RulesService
// definition as a real client loads it, health, deadlines and the rich error model.
//
// The server command is <repo>/.venv/bin/basra-rules unless BASRA_RULES_BIN names another
// executable.

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import readline from 'node:readline';
import { fileURLToPath } from 'node:url';

import grpc from '@grpc/grpc-js';
import protoLoader from '@grpc/proto-loader';
import protobuf from 'protobufjs';

const HERE = path.dirname(fileURLToPath(import.meta.url));
export const REPO = path.resolve(HERE, '..', '..');
const PROTO_ROOT = path.join(REPO, 'proto');
export const CALL_DEADLINE_MS = 5000;
const STARTUP_DEADLINE_MS = 30000;

// The gRPC error model and health messages are not part of our .proto files; the few fields
// this test reads are declared here so that nothing else has to be fetched.
const EXTRA_TYPES = protobuf.Root.fromJSON({
  nested: {
    google: {
      nested: {
        protobuf: {
          nested: {
            Any: {
              fields: { type_url: { type: 'string', id: 1 }, value: { type: 'bytes', id: 2 } },
            },
          },
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
    grpc: {
      nested: {
        health: {
          nested: {
            v1: {
              nested: {
                HealthCheckRequest: { fields: { service: { type: 'string', id: 1 } } },
                HealthCheckResponse: { fields: { status: { type: 'int32', id: 1 } } },
              },
            },
          },
        },
      },
    },
  },
});
const RpcStatus = EXTRA_TYPES.lookupType('google.rpc.Status');
const ErrorInfo = EXTRA_TYPES.lookupType('google.rpc.ErrorInfo');
const HealthCheckRequest = EXTRA_TYPES.lookupType('grpc.health.v1.HealthCheckRequest');
const HealthCheckResponse = EXTRA_TYPES.lookupType('grpc.health.v1.HealthCheckResponse');
export const SERVING = 1;

export const HealthClient = grpc.makeGenericClientConstructor(
  {
    Check: {
      path: '/grpc.health.v1.Health/Check',
      requestStream: false,
      responseStream: false,
      requestSerialize: (value) => Buffer.from(HealthCheckRequest.encode(value).finish()),
      requestDeserialize: (bytes) => HealthCheckRequest.decode(bytes),
      responseSerialize: (value) => Buffer.from(HealthCheckResponse.encode(value).finish()),
      responseDeserialize: (bytes) => HealthCheckResponse.toObject(HealthCheckResponse.decode(bytes)),
    },
  },
  'Health',
);

export function loadRulesService() {
  const dir = path.join(PROTO_ROOT, 'basra', 'v1');
  const files = fs
    .readdirSync(dir)
    .filter((name) => name.endsWith('.proto'))
    .map((name) => path.join('basra', 'v1', name));
  const definition = protoLoader.loadSync(files, {
    includeDirs: [PROTO_ROOT],
    // Field names exactly as in the .proto (snake_case); unset fields stay absent, so a state
    // sent back is byte-for-byte what the server returned (optional seats keep their presence).
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

export function serverCommand() {
  if (process.env.BASRA_RULES_BIN) return process.env.BASRA_RULES_BIN;
  const venv = path.join(REPO, '.venv', 'bin', 'basra-rules');
  return fs.existsSync(venv) ? venv : 'basra-rules';
}

export const deadline = (ms = CALL_DEADLINE_MS) => ({ deadline: new Date(Date.now() + ms) });

export function unary(client, method, request) {
  return new Promise((resolve, reject) => {
    client[method](request, deadline(), (error, response) =>
      error ? reject(error) : resolve(response),
    );
  });
}

export async function startServer(flags = []) {
  // The server binds a port of its own choosing (--port 0) and names it in its "serving" log
  // line (JSON on standard output), so no other process can take the port in between.
  const child = spawn(
    serverCommand(),
    [
      'serve', '--host', '127.0.0.1', '--port', '0', '--metrics-port', '0', '--log-format', 'json',
      ...flags,
    ],
    { cwd: REPO, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let output = '';
  // RulesService calls answered or refused by a handler, by method, from their log lines.
  const calls = {};
  const keep = (text) => {
    output = (output + text).slice(-4000);
  };
  child.stderr.on('data', (chunk) => keep(chunk.toString()));
  // If this test process dies first, take the server down too (its workers follow it).
  const reap = () => child.kill('SIGKILL');
  process.once('exit', reap);
  child.on('exit', () => process.removeListener('exit', reap));
  const port = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`no "serving" log line within ${STARTUP_DEADLINE_MS} ms:\n${output}`));
    }, STARTUP_DEADLINE_MS);
    readline.createInterface({ input: child.stdout }).on('line', (text) => {
      keep(`${text}\n`);
      let line;
      try {
        line = JSON.parse(text);
      } catch {
        return;
      }
      if (line.event === 'rpc' && line.method?.startsWith('basra.v1.RulesService/')) {
        const method = line.method.split('/')[1];
        calls[method] = (calls[method] ?? 0) + 1;
      }
      if (line.event === 'serving') {
        clearTimeout(timer);
        resolve(line.port);
      }
    });
    child.on('exit', (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`[${serverCommand()} exited: code ${code}, signal ${signal}]\n${output}`));
    });
    child.on('error', (error) => {
      clearTimeout(timer);
      reject(new Error(`cannot run ${serverCommand()}: ${error.message}`));
    });
  });
  const address = `127.0.0.1:${port}`;
  // What a kubelet or a gateway would ask first: the rules service reports SERVING.
  const health = new HealthClient(address, grpc.credentials.createInsecure());
  try {
    const status = await new Promise((resolve, reject) => {
      health.Check({ service: 'basra.v1.RulesService' }, deadline(), (error, reply) =>
        error ? reject(error) : resolve(reply.status),
      );
    });
    assert.equal(status, SERVING);
  } finally {
    health.close();
  }
  return { child, address, calls };
}

export function stopServer(child) {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) {
      resolve();
      return;
    }
    const force = setTimeout(() => child.kill('SIGKILL'), 15000);
    child.on('exit', () => {
      clearTimeout(force);
      resolve();
    });
    child.kill('SIGTERM');
  });
}

export function errorInfoOf(error) {
  const [raw] = error.metadata.get('grpc-status-details-bin');
  assert.ok(raw, 'the refusal carries grpc-status-details-bin metadata');
  const status = RpcStatus.decode(raw);
  assert.equal(status.code, error.code, 'the rich status repeats the call status code');
  assert.equal(status.details.length, 1, 'exactly one detail');
  const [detail] = status.details;
  assert.equal(detail.type_url, 'type.googleapis.com/google.rpc.ErrorInfo');
  return ErrorInfo.toObject(ErrorInfo.decode(detail.value));
}

