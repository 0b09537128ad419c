// KafkaJS (a pure JavaScript client, independent of librdkafka and of
// kafka-python) against Kappa's Kafka listener, for tests/tests/kafka_node.rs.
//
// Usage (the module directory holding kafkajs is $KAFKAJS_MODULES):
//   node kafkajs_roundtrip.js produce BROKER TOPIC COUNT
//       Creates TOPIC with 3 partitions through the admin client, then an
//       idempotent producer sends COUNT records in batches of 100, odd
//       batches gzip-compressed: key "key-<i>", value {"n": i} as JSON,
//       headers seq=<i> and source=kafkajs, timestamp 1767225600000 + i.
//       Prints {"produced": COUNT, "partitions": [...]} (the topic's
//       partitions from its metadata).
//   node kafkajs_roundtrip.js consume BROKER TOPIC COUNT GROUP
//       Reads TOPIC from the beginning in group GROUP until COUNT records
//       arrived, commits, leaves, then describes the group and lists
//       groups and the group's committed offsets through the admin client.
//       Prints {"consumed": [{partition, offset, timestamp, key, value,
//       headers}], "groups": [...], "state": ..., "offsets": [...]}.
//
// Every answer is one JSON line on stdout; errors go to stderr with exit 1.

const path = require('path');
const { Kafka, CompressionTypes, logLevel } = require(
  path.join(process.env.KAFKAJS_MODULES, 'kafkajs'),
);

const DEADLINE_MS = 30000;
const [mode, broker, topic, countText, group] = process.argv.slice(2);
const count = Number(countText);
const kafka = new Kafka({
  clientId: 'kappa-test-kafkajs',
  brokers: [broker],
  logLevel: logLevel.ERROR,
});

async function produce() {
  const admin = kafka.admin();
  await admin.connect();
  await admin.createTopics({ topics: [{ topic, numPartitions: 3 }], waitForLeaders: true });
  const metadata = await admin.fetchTopicMetadata({ topics: [topic] });
  await admin.disconnect();
  const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1 });
  await producer.connect();
  for (let first = 0; first < count; first += 100) {
    const messages = [];
    for (let i = first; i < Math.min(first + 100, count); i++) {
      messages.push({
        key: `key-${i}`,
        value: JSON.stringify({ n: i }),
        headers: { seq: String(i), source: 'kafkajs' },
        timestamp: String(1767225600000 + i),
      });
    }
    const odd = (first / 100) % 2 === 1;
    await producer.send({
      topic,
      messages,
      acks: -1,
      compression: odd ? CompressionTypes.GZIP : CompressionTypes.None,
    });
  }
  await producer.disconnect();
  const partitions = metadata.topics[0].partitions.map((p) => p.partitionId).sort();
  return { produced: count, partitions };
}

async function consume() {
  const consumer = kafka.consumer({ groupId: group });
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  const consumed = [];
  await new Promise((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`only ${consumed.length} of ${count} records in ${DEADLINE_MS} ms`)),
      DEADLINE_MS,
    );
    consumer
      .run({
        autoCommit: false,
        eachMessage: async ({ partition, message }) => {
          const headers = {};
          for (const [name, value] of Object.entries(message.headers)) {
            headers[name] = value.toString();
          }
          consumed.push({
            partition,
            offset: Number(message.offset),
            timestamp: Number(message.timestamp),
            key: message.key.toString(),
            value: message.value.toString(),
            headers,
          });
          await consumer.commitOffsets([
            { topic, partition, offset: String(Number(message.offset) + 1) },
          ]);
          if (consumed.length >= count) {
            clearTimeout(timer);
            resolve();
          }
        },
      })
      .catch(reject);
  });
  await consumer.disconnect();
  const admin = kafka.admin();
  await admin.connect();
  const groups = (await admin.listGroups()).groups.map((g) => g.groupId).sort();
  const described = await admin.describeGroups([group]);
  const offsets = await admin.fetchOffsets({ groupId: group, topics: [topic] });
  await admin.disconnect();
  return {
    consumed,
    groups,
    state: described.groups[0].state,
    offsets: offsets[0].partitions.map((p) => [p.partition, Number(p.offset)]),
  };
}

(mode === 'produce' ? produce() : consume())
  .then((answer) => {
    // Exit once the answer is written: a pipe takes it asynchronously.
    process.stdout.write(`${JSON.stringify(answer)}\n`, () => process.exit(0));
  })
  .catch((error) => {
    process.stderr.write(`FAILED: ${error.stack || error}\n`);
    process.exit(1);
  });
