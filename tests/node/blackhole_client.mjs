// The grpc-js client of testkit.blackhole: the example lobby's channel (examples/lobby/rules.mjs:
// the published keepalive and service config) sends NewMatch at a fixed rate under a deadline,
// then prints every call's send time (CLOCK_MONOTONIC, as Python's time.monotonic) and status.
// Usage: node blackhole_client.mjs TARGET SECONDS RATE DEADLINE_MS [SERVICE_CONFIG]
// (SERVICE_CONFIG: another service config file than deploy/grpc-service-config.json)
import { connect } from '../../examples/lobby/rules.mjs';

const [target, seconds, rate, deadlineMs, serviceConfig] = process.argv.slice(2);
const now = () => Number(process.hrtime.bigint()) / 1e9;
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const rules = connect(target, { deadlineMs: Number(deadlineMs), ...(serviceConfig ? { serviceConfig } : {}) });
// Warm up: a few calls round both servers before the measured ones.
for (let n = 0; n < 10; n += 1) {
  await rules.newMatch({ seed: Buffer.from(`warm-${n}`) });
}
console.log(JSON.stringify({ event: 'ready', at: now() }));
const calls = [];
const running = [];
const start = now();
for (let n = 0; start + n / Number(rate) < start + Number(seconds); n += 1) {
  const wait = (start + n / Number(rate) - now()) * 1000;
  if (wait > 0) await sleep(wait);
  const sent = now();
  running.push(
    rules.newMatch({ seed: Buffer.from(`call-${n}`) }).then(
      () => calls.push([sent, 'OK']),
      (refusal) => calls.push([sent, refusal.status ?? String(refusal)]),
    ),
  );
}
await Promise.all(running);
calls.sort((a, b) => a[0] - b[0]);
console.log(JSON.stringify({ event: 'calls', calls }));
rules.close();
process.exit(0);
