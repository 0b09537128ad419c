"""One confluent-kafka consumer of a group, for tests/tests/kafka_python.rs.

Usage: group_consume.py BOOTSTRAP TOPIC GROUP SESSION_TIMEOUT_MS

Subscribes with enable.auto.commit=false and auto.offset.reset=earliest,
and after each batch of messages is processed (printed) commits it
synchronously. One JSON object per stdout line:

  {"event": "assigned", "partitions": [...]}   on every assignment
  {"event": "revoked", "partitions": [...]}    on every revocation
  {"event": "consumed", "records": [[partition, offset, id], ...]}
  {"event": "committed", "offsets": [[partition, next_offset], ...]}
  {"event": "error", "error": "..."}
  {"event": "closed"}                          after close() (LeaveGroup)

A line on stdin (or its end) asks for a graceful stop: close(), which
leaves the group, then exit.
"""

import json
import select
import sys

from confluent_kafka import Consumer, KafkaException


def emit(obj):
    print(json.dumps(obj), flush=True)


def main():
    bootstrap, topic, group = sys.argv[1], sys.argv[2], sys.argv[3]
    session_timeout_ms = int(sys.argv[4])
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "session.timeout.ms": session_timeout_ms,
            "heartbeat.interval.ms": 500,
            "fetch.wait.max.ms": 100,
            "reconnect.backoff.ms": 20,
            "reconnect.backoff.max.ms": 200,
        }
    )

    def on_assign(c, partitions):
        emit({"event": "assigned", "partitions": sorted(p.partition for p in partitions)})

    def on_revoke(c, partitions):
        emit({"event": "revoked", "partitions": sorted(p.partition for p in partitions)})

    consumer.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke)
    while not select.select([sys.stdin], [], [], 0)[0]:
        messages = consumer.consume(num_messages=500, timeout=0.1)
        records = []
        for m in messages:
            if m.error() is not None:
                emit({"event": "error", "error": str(m.error())})
                continue
            records.append([m.partition(), m.offset(), json.loads(m.value())["id"]])
        if not records:
            continue
        emit({"event": "consumed", "records": records})
        try:
            done = consumer.commit(asynchronous=False)
        except KafkaException as e:
            # A commit refused during a rebalance: the records are
            # consumed again by the partition's next owner.
            emit({"event": "error", "error": "commit: %s" % e})
            continue
        emit({"event": "committed", "offsets": [[p.partition, p.offset] for p in done]})
    consumer.close()
    emit({"event": "closed"})


if __name__ == "__main__":
    main()
