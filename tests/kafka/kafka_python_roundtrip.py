"""kafka-python (a pure-Python client, independent of librdkafka) against
Kappa's Kafka listener, for tests/tests/kafka_python.rs.

Usage:
  kafka_python_roundtrip.py produce BOOTSTRAP TOPIC COUNT
      Produces COUNT records: key "key-<i>", value {"n": i, "text": "..."}
      as JSON, headers [("seq", "<i>"), ("source", "kafka-python")], to
      partition i % partitions, gzip-compressed, and prints one JSON line
      {"produced": [[i, partition, offset, timestamp], ...]} from the
      record metadata of every acknowledged send.
  kafka_python_roundtrip.py consume BOOTSTRAP TOPIC COUNT GROUP
      Reads the topic from the beginning in group GROUP until COUNT records
      arrived (or a deadline passed), commits, and prints one JSON line
      {"consumed": [{"partition", "offset", "timestamp", "key", "value",
      "headers"}, ...]} with key, value and header values as UTF-8 text.
"""

import json
import sys
import time

from kafka import KafkaConsumer, KafkaProducer, TopicPartition

DEADLINE_S = 30


def produce(bootstrap, topic, count):
    producer = KafkaProducer(
        bootstrap_servers=bootstrap,
        acks="all",
        compression_type="gzip",
        linger_ms=5,
        client_id="kappa-test-kafka-python",
    )
    partitions = sorted(producer.partitions_for(topic))
    futures = []
    for i in range(count):
        value = json.dumps({"n": i, "text": "caf\u00e9 %d" % i}).encode()
        future = producer.send(
            topic,
            key=("key-%d" % i).encode(),
            value=value,
            headers=[("seq", str(i).encode()), ("source", b"kafka-python")],
            partition=partitions[i % len(partitions)],
        )
        futures.append((i, future))
    producer.flush(DEADLINE_S)
    produced = []
    for i, future in futures:
        meta = future.get(timeout=DEADLINE_S)
        produced.append([i, meta.partition, meta.offset, meta.timestamp])
    producer.close()
    print(json.dumps({"produced": produced}), flush=True)


def consume(bootstrap, topic, count, group):
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        client_id="kappa-test-kafka-python",
    )
    consumer.subscribe([topic])
    consumed = []
    deadline = time.monotonic() + DEADLINE_S
    while len(consumed) < count and time.monotonic() < deadline:
        for tp, messages in consumer.poll(timeout_ms=200).items():
            for m in messages:
                consumed.append(
                    {
                        "partition": m.partition,
                        "offset": m.offset,
                        "timestamp": m.timestamp,
                        "key": None if m.key is None else m.key.decode(),
                        "value": m.value.decode(),
                        "headers": [[k, v.decode()] for k, v in m.headers],
                    }
                )
        if consumed:
            consumer.commit()
    consumer.close()
    print(json.dumps({"consumed": consumed}), flush=True)


def groups(bootstrap):
    """Prints the consumer groups the admin client lists."""
    from kafka.admin import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    def name(group):
        # kafka-python 3 answers tuples or dicts depending on the version.
        if isinstance(group, (tuple, list)):
            return group[0]
        if isinstance(group, dict):
            return group["group_id"]
        return getattr(group, "group_id", group)

    listed = sorted(name(g) for g in admin.list_groups())
    admin.close()
    print(json.dumps({"groups": listed}), flush=True)


def main():
    if sys.argv[1] == "groups":
        groups(sys.argv[2])
        return
    mode, bootstrap, topic, count = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    if mode == "produce":
        produce(bootstrap, topic, count)
    elif mode == "consume":
        consume(bootstrap, topic, count, sys.argv[5])
    else:
        sys.exit("unknown mode %r" % mode)


if __name__ == "__main__":
    main()
