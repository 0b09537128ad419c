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
//   node kafkajs_roundtrip.js admin BROKER TOPIC
//       Creates TOPIC (2 partitions, retention.ms=60000) and describes its
//       configs; produces two records to partition 0 with acks=1
//       (timestamps 1767225600000 and 1767225601000) and one to partition
//       1 with acks=0 (1767225602000), waits (bounded) until the offsets
//       show it, looks offsets up by timestamp 1767225601000, deletes the
//       topic and lists topics. Prints {"configs": {name: value},
//       "offsets": [[partition, low, high]], "by_time": [[partition,
//       offset]], "topics": [...]}.
//
// Every answer is one JSON line on stdout; errors go to stderr with exit 1.

const path = require('path');
const { Kafka, CompressionTypes, ConfigResourceTypes, logLevel } = require(
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

async function admin() {
  const client = kafka.admin();
  await client.connect();
  await client.createTopics({
    topics: [{ topic, numPartitions: 2, configEntries: [{ name: 'retention.ms', value: '60000' }] }],
  });
  const described = await client.describeConfigs({
    includeSynonyms: false,
    resources: [{ type: ConfigResourceTypes.TOPIC, name: topic }],
  });
  const configs = {};
  for (const entry of described.resources[0].configEntries) {
    configs[entry.configName] = entry.configValue;
  }
  const producer = kafka.producer();
  await producer.connect();
  await producer.send({
    topic,
    acks: 1,
    messages: [
      { partition: 0, value: 'one', timestamp: '1767225600000' },
      { partition: 0, value: 'two', timestamp: '1767225601000' },
    ],
  });
  await producer.send({
    topic,
    acks: 0,
    messages: [{ partition: 1, value: 'zero', timestamp: '1767225602000' }],
  });
  await producer.disconnect();
  // acks=0 has no answer: poll the offsets until the record shows.
  const deadline = Date.now() + DEADLINE_MS;
  let offsets = [];
  for (;;) {
    offsets = (await client.fetchTopicOffsets(topic))
      .map((p) => [p.partition, Number(p.low), Number(p.high)])
      .sort((a, b) => a[0] - b[0]);
    if (offsets.every(([, , high]) => high > 0)) break;
    if (Date.now() > deadline) throw new Error(`acks=0 record never showed: ${offsets}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  const byTime = (await client.fetchTopicOffsetsByTimestamp(topic, 1767225601000))
    .map((p) => [p.partition, Number(p.offset)])
    .sort((a, b) => a[0] - b[0]);
  await client.deleteTopics({ topics: [topic] });
  const topics = (await client.listTopics()).sort();
  await client.disconnect();
  return { configs, offsets, by_time: byTime, topics };
}

const modes = { produce, consume, admin };
modes[mode]()
  .then((answer) => {
    // Exit once the answer is written: a pipe takes it asynchronously.
    process.stdout.write(`${JSON.stringify(answer)}\n`, () => process.exit(0));
  })
  .catch((error) => {
    process.stderr.write(`FAILED: ${error.stack || error}\n`);
    process.exit(1);
  });
