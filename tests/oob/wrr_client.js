// SPDX-License-Identifier: Apache-2.0
// The client of tests/oob/wrr_test.py: grpc-js, unmodified, balancing over
// hr-wrr-backend servers with round_robin or weighted_round_robin (OOB load
// reports: the backends' OrcaService). Keeps a fixed number of calls in
// flight, warms up, then counts which backend answered each call started in
// the measured window, and prints one JSON line:
//   {"policy": ..., "counts": {NAME: N, ...}, "errors": N, "seconds": S,
//    "slices": [{NAME: N, ...}, ...]}        (one slice per measured second)
//
//   node wrr_client.js --target ipv4:127.0.0.1:P1,127.0.0.1:P2 --proto wrr_backend.proto
//        --policy round_robin|weighted_round_robin [--inflight 8] [--warmup S] [--seconds S]
//
// grpc-js and @grpc/proto-loader come from NODE_PATH
// (packaging/install-grpc-js.sh). GRPC_TRACE=weighted_round_robin
// GRPC_VERBOSITY=DEBUG makes grpc-js log every picker's weights on stderr.
'use strict';

const grpc = require('@grpc/grpc-js');
const protoLoader = require('@grpc/proto-loader');

// The weighted_round_robin config the test runs: OOB reports every 0.5 s, a
// 1 s blackout and weights refreshed every 0.2 s, so that a short test sees
// settled weights (the defaults are 10 s, 10 s and 1 s).
const WRR = {
  enable_oob_load_report: true,
  oob_load_reporting_period: '0.5s',
  blackout_period: '1s',
  weight_update_period: '0.2s',
};

function parseArgs(argv) {
  const args = { inflight: 8, warmup: 2, seconds: 4 };
  for (let i = 2; i < argv.length; i += 2) {
    const key = argv[i].replace(/^--/, '');
    const value = argv[i + 1];
    if (value === undefined) throw new Error(`${argv[i]} needs a value`);
    if (!['target', 'proto', 'policy', 'inflight', 'warmup', 'seconds'].includes(key)) {
      throw new Error(`unknown argument ${argv[i]}`);
    }
    args[key] = ['inflight', 'warmup', 'seconds'].includes(key) ? Number(value) : value;
  }
  if (!args.target || !args.proto) throw new Error('--target and --proto are required');
  if (!['round_robin', 'weighted_round_robin'].includes(args.policy)) {
    throw new Error('--policy is round_robin or weighted_round_robin');
  }
  return args;
}

function serviceConfig(policy) {
  const lb = policy === 'weighted_round_robin' ? { weighted_round_robin: WRR } : { round_robin: {} };
  return JSON.stringify({ loadBalancingConfig: [lb] });
}

function main() {
  const args = parseArgs(process.argv);
  const definition = protoLoader.loadSync(args.proto, { keepCase: true, longs: Number });
  const Backend = grpc.loadPackageDefinition(definition).headroom.test.Backend;
  const client = new Backend(args.target, grpc.credentials.createInsecure(), {
    'grpc.service_config': serviceConfig(args.policy),
  });

  // Set once the channel is ready: the warm-up counts from there.
  let measureFrom = 0;
  let measureUntil = 0;
  const counts = {};
  const slices = Array.from({ length: Math.ceil(args.seconds) }, () => ({}));
  let errors = 0;
  let lastError = '';
  let running = 0;

  const finish = () => {
    client.close();
    const out = { policy: args.policy, counts, errors, seconds: args.seconds, slices };
    if (lastError) out.last_error = lastError;
    process.stdout.write(JSON.stringify(out) + '\n');
  };

  const call = () => {
    const begun = Date.now();
    if (begun >= measureUntil) {
      running -= 1;
      if (running === 0) finish();
      return;
    }
    const deadline = new Date(begun + 5000);
    client.Call({ payload: 'x' }, { deadline }, (err, reply) => {
      const measured = begun >= measureFrom && begun < measureUntil;
      if (err) {
        if (measured) errors += 1;
        lastError = err.message;
      } else if (measured) {
        counts[reply.backend] = (counts[reply.backend] || 0) + 1;
        const slice = slices[Math.floor((begun - measureFrom) / 1000)];
        if (slice) slice[reply.backend] = (slice[reply.backend] || 0) + 1;
      }
      setImmediate(call);
    });
  };

  client.waitForReady(new Date(Date.now() + 10000), (err) => {
    if (err) {
      process.stderr.write(`wrr_client: channel not ready: ${err.message}\n`);
      process.exit(1);
    }
    measureFrom = Date.now() + args.warmup * 1000;
    measureUntil = measureFrom + args.seconds * 1000;
    for (running = 0; running < args.inflight; running += 1) setImmediate(call);
  });
}

try {
  main();
} catch (e) {
  process.stderr.write(`wrr_client: ${e.message}\n`);
  process.exit(2);
}
