"""One confluent-kafka consumer with a static group instance id
(group.instance.id), for tests/tests/kafka_static.rs.

Usage: static_member.py BOOTSTRAP TOPIC GROUP INSTANCE COUNT

Subscribes (auto.offset.reset=earliest, no auto commit) until it has an
assignment and has read COUNT records (0: just the assignment), commits
what it read, and closes — which, for a static member, does not leave the
group. Prints one JSON line:
  {"assigned": [partitions], "consumed": [[partition, offset], ...]}
"""

import json
import sys
import time

from confluent_kafka import Consumer

DEADLINE_S = 30


def main():
    bootstrap, topic, group, instance = sys.argv[1:5]
    count = int(sys.argv[5])
    assigned = []
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "group.instance.id": instance,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "session.timeout.ms": 30000,
            "client.id": "kappa-test-static",
        }
    )
    consumer.subscribe(
        [topic], on_assign=lambda c, parts: assigned.extend(p.partition for p in parts)
    )
    consumed = []
    deadline = time.monotonic() + DEADLINE_S
    while not assigned or len(consumed) < count:
        if time.monotonic() > deadline:
            sys.exit(f"deadline: assigned {assigned}, consumed {len(consumed)} of {count}")
        message = consumer.poll(0.1)
        if message is None:
            continue
        if message.error():
            sys.exit(f"consumer error: {message.error()}")
        consumed.append([message.partition(), message.offset()])
    if consumed:
        consumer.commit(asynchronous=False)
    consumer.close()
    print(json.dumps({"assigned": sorted(assigned), "consumed": consumed}), flush=True)


if __name__ == "__main__":
    main()
