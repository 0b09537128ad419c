#!/usr/bin/env python3
"""Kafka load for tools/bench-kafka.sh: produce or consume RECORDS records of
100 bytes on one topic with confluent-kafka (librdkafka), printing the
seconds it took and the records per second as JSON.

    kafka-load.py produce BROKER TOPIC RECORDS [CODEC]
    kafka-load.py consume BROKER TOPIC RECORDS

produce: acks=all, linger.ms=5, batches as librdkafka forms them (up to
1 MB), no compression; timed from the first produce() to the end of
flush(). With CODEC (zstd, lz4, ...) the producer compresses its batches
with it, and the values are seed-like JSON events of about 100 bytes, each
its own (so that compression has real work), instead of 100 x's. consume: one consumer, no group commits, from the beginning,
consume() in batches of 10,000; timed until RECORDS records arrived.
"""
import json
import sys
import time

from confluent_kafka import Consumer, Producer, TopicPartition


def event(i):
    """A seed-like event of about 100 bytes, different for each `i`."""
    return (
        f'{{"event_id":"e-{i:09d}","user_id":"user-{i * 7 % 997}","event_type":"'
        f'{("view", "cart", "purchase")[i % 3]}","amount":{i % 10_000 / 100},"currency":"EUR"}}'
    ).encode()


def produce(broker, topic, records, codec=None):
    config = {
        "bootstrap.servers": broker,
        "acks": "all",
        "linger.ms": 5,
        "batch.size": 1_000_000,
        "queue.buffering.max.messages": 1_000_000,
    }
    if codec:
        config["compression.type"] = codec
    producer = Producer(config)
    failed = []
    x = b"x" * 100
    start = time.monotonic()
    for i in range(records):
        value = event(i) if codec else x
        while True:
            try:
                producer.produce(topic, value, on_delivery=lambda e, m: e and failed.append(e))
                break
            except BufferError:
                producer.poll(0.001)
    left = producer.flush(120)
    seconds = time.monotonic() - start
    if left or failed:
        sys.exit(f"{left} not delivered, {len(failed)} failed: {failed[:3]}")
    return seconds


def consume(broker, topic, records):
    consumer = Consumer({
        "bootstrap.servers": broker,
        "group.id": "kafka-load",
        "enable.auto.commit": False,
        "fetch.max.bytes": 52_428_800,
        "max.partition.fetch.bytes": 10_485_760,
        # Builds before the fetch counted its budget in answered bytes sent
        # a compressed topic's fetches decompressed, far over the budget.
        "receive.message.max.bytes": 1_000_000_000,
    })
    consumer.assign([TopicPartition(topic, 0, 0)])
    seen = 0
    start = time.monotonic()
    deadline = start + 300
    while seen < records:
        if time.monotonic() > deadline:
            sys.exit(f"consumed {seen} of {records} in 300 s")
        for message in consumer.consume(10_000, 1.0):
            if message.error():
                sys.exit(f"consume error: {message.error()}")
            seen += 1
    seconds = time.monotonic() - start
    consumer.close()
    return seconds


def main():
    mode, broker, topic, records = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    if mode == "produce":
        seconds = produce(broker, topic, records, *sys.argv[5:6])
    else:
        seconds = consume(broker, topic, records)
    print(json.dumps({"mode": mode, "seconds": seconds, "records_per_second": records / seconds}))


if __name__ == "__main__":
    main()
