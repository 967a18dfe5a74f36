// The ali-ons side of broker/tests/interop_ali_ons_acl.rs: one run of Alibaba's Node.js
// RocketMQ 4 client (npm `ali-ons`, pinned in package.json / package-lock.json here),
// signing every request with the keys it is given, pointed at a RingMQ NameServer
// directly (`nameSrv`, so no HTTP onsAddr lookup). It prints one line
// `RESULT {json}` on stdout for the Rust test to check; ali-ons's own warnings go to
// stderr.
//
// Environment: NAMESRV (host:port), ACCESS_KEY, SECRET_KEY, TOPIC, GROUP (the producer
// and consumer group suffix), COUNT (messages, pubsub only), DEADLINE_MS (the run's
// bound: past it the script prints what it has and exits 2).
//
// Modes (argv[2]):
//   pubsub: a producer sends COUNT messages `ali-ons-<i>` with `producer.send`, then a
//           clustering push consumer of a fresh group reads the topic from its first
//           offset until it has every body sent. RESULT {sent: [{body, msgId, queueId}],
//           received: [body]}.
//   refused: one `producer.send` (the public call, which swallows NO_PERMISSION and
//           retries) and one `sendKernelImpl` to the first queue (which throws the
//           broker's answer). RESULT {sendError, code, message}, or {sent} if the
//           broker took it.
'use strict';

const { Producer, Consumer, Message } = require('ali-ons');
const ConsumeFromWhere = require('ali-ons/lib/consumer/consume_from_where');

const env = name => {
  const v = process.env[name];
  if (v === undefined) {
    throw new Error(`${name} is not set`);
  }
  return v;
};

const mode = process.argv[2];
const deadlineMs = Number(env('DEADLINE_MS'));
const started = Date.now();
const common = {
  // ali-ons asserts an HTTP client is given; with `nameSrv` it never calls it.
  httpclient: { request() { throw new Error('no HTTP: nameSrv is given'); } },
  nameSrv: env('NAMESRV'),
  accessKey: env('ACCESS_KEY'),
  secretKey: env('SECRET_KEY'),
  // One client instance per process and role (ali-ons shares clients by instanceName).
  instanceName: `ali-ons-acl-${process.pid}`,
};
const topic = env('TOPIC');
const group = env('GROUP');

function result(value, code = 0) {
  process.stdout.write(`RESULT ${JSON.stringify(value)}\n`);
  process.exit(code);
}

const progress = {};
setTimeout(() => result(Object.assign({ timedOut: true }, progress), 2), deadlineMs).unref();

async function pubsub() {
  const count = Number(env('COUNT'));
  const producer = new Producer(Object.assign({}, common, {
    producerGroup: `PG-${group}`,
    retryTimesWhenSendFailed: 0,
  }));
  producer.on('error', err => console.error('producer error:', err));
  await producer.ready();
  const sent = progress.sent = [];
  for (let i = 0; i < count; i++) {
    const body = `ali-ons-${i}`;
    const r = await producer.send(new Message(topic, 'TagA', body));
    if (r.sendStatus !== 'SEND_OK') {
      throw new Error(`send ${i}: ${JSON.stringify(r)}`);
    }
    sent.push({ body, msgId: r.msgId, queueId: r.messageQueue.queueId });
  }
  await producer.close();

  const consumer = new Consumer(Object.assign({}, common, {
    consumerGroup: `CG-${group}`,
    consumeFromWhere: ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
    // Short long-polls: the consumer's close waits for them.
    brokerSuspendMaxTimeMillis: 1000,
    consumerTimeoutMillisWhenSuspend: 3000,
    pullTimeDelayMillsWhenException: 200,
  }));
  const errors = progress.consumerErrors = [];
  consumer.on('error', err => {
    errors.push(String(err && err.message));
    console.error('consumer error:', err);
  });
  const received = progress.received = [];
  const all = new Promise(resolve => {
    consumer.subscribe(topic, '*', async msg => {
      received.push(msg.body.toString());
      if (sent.every(s => received.includes(s.body))) {
        resolve();
      }
    });
  });
  await consumer.ready();
  await all;
  await consumer.close();
  result({ sent, received, consumerErrors: errors });
}

async function refused() {
  const producer = new Producer(Object.assign({}, common, {
    producerGroup: `PG-${group}`,
    retryTimesWhenSendFailed: 0,
  }));
  producer.on('error', err => console.error('producer error:', err));
  await producer.ready();
  const out = {};
  try {
    const r = await producer.send(new Message(topic, 'TagA', 'must-be-refused'));
    out.sent = r;
  } catch (err) {
    out.sendError = String(err.message);
  }
  // The public send keeps the broker's code to itself: ask once more, a level down.
  const info = await producer.tryToFindTopicPublishInfo(topic);
  const queue = info && info.messageQueueList[0];
  if (!queue) {
    throw new Error(`no route for ${topic}`);
  }
  try {
    const r = await producer.sendKernelImpl(new Message(topic, 'TagA', 'must-be-refused'), queue);
    out.sent = r;
  } catch (err) {
    out.code = err.code;
    out.name = err.name;
    out.message = String(err.message);
  }
  // Its close unregisters, signed the same way: with a wrong secret that is refused too.
  try {
    await producer.close();
  } catch (err) {
    out.closeError = String(err.message);
  }
  result(out);
}

const run = { pubsub, refused }[mode];
if (!run) {
  throw new Error(`unknown mode ${mode}`);
}
run().catch(err => result(Object.assign({ error: String(err && err.stack || err) }, progress), 1));
