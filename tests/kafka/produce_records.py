"""Produces records to a Kafka cluster with confluent-kafka, for
tests/tests/cluster_views.rs.

Usage: produce_records.py BOOTSTRAP TOPIC RECORDS_FILE

RECORDS_FILE holds one JSON object a line: {"key": str, "timestamp": ms,
"value": any JSON, "partition": n (optional)}. Each is produced with its
key (the default partitioner picks the partition unless the line names
one), its timestamp (CreateTime) and its value as JSON
text, with acks=all and idempotence; the script flushes and exits 0 only
when every record was acknowledged, printing {"acked": n}.
"""

import json
import sys

from confluent_kafka import Producer


def main():
    bootstrap, topic, path = sys.argv[1:4]
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 5,
        }
    )
    failed = []
    acked = [0]

    def report(err, _msg):
        if err is None:
            acked[0] += 1
        else:
            failed.append(str(err))

    with open(path) as f:
        for line in f:
            r = json.loads(line)
            extra = {"partition": r["partition"]} if "partition" in r else {}
            while True:
                try:
                    producer.produce(
                        topic,
                        key=r["key"].encode(),
                        value=json.dumps(r["value"]).encode(),
                        timestamp=r["timestamp"],
                        on_delivery=report,
                        **extra,
                    )
                    break
                except BufferError:
                    producer.poll(0.1)
            producer.poll(0)
    left = producer.flush(60)
    print(json.dumps({"acked": acked[0], "failed": failed[:5], "unflushed": left}))
    sys.exit(0 if not failed and left == 0 else 1)


if __name__ == "__main__":
    main()
