"""Idempotent confluent-kafka producer for tests/tests/kafka_python.rs.

Usage: idempotent_produce.py BOOTSTRAP TOPIC COUNT GATE ACKED_FILE REQUEST_TIMEOUT_MS [TOKEN]

Produces COUNT messages with values `{"id": i, "pad": "..."}` (ids
0..COUNT-1, keys "k<i>") with enable.idempotence, acks=all, unbounded
retries and snappy compression, never more than WINDOW unreported at once.
Before producing id GATE (if below COUNT) it waits for a line on stdin: the
test kills and restarts the server meanwhile, so the rest of the run must
go to the restarted server. Each id whose delivery report carries no error
is appended to ACKED_FILE (one id a line). With TOKEN, it logs in with
SASL/PLAIN, the token as password. On stdout, one JSON object per
line:

  {"event": "acked", "count": n}           after every PROGRESS_EVERY acks
  {"event": "gate", "acked": n}            waiting at GATE for stdin
  {"event": "client_error", "name": ..., "text": ...}   from error_cb
  {"event": "request_timeout", "text": ...}   librdkafka gave up on
                                              requests in flight (REQTMOUT)
  {"event": "done", "acked": n, "failed": m, "unflushed": u, "retransmitted": r,
   "errors": [...]}
"""

import json
import select
import sys
import time

from confluent_kafka import Producer

PROGRESS_EVERY = 500
# At most this many messages are produced but not yet reported.
WINDOW = 2000


class Log:
    """librdkafka's log lines (delivered by poll): REQTMOUT ones become
    events, all go to stderr."""

    def log(self, level, fmt, *args):
        facility, _name, text = args
        sys.stderr.write("%d %s %s\n" % (level, facility, text))
        if facility == "REQTMOUT" and "in-flight" in text:
            print(json.dumps({"event": "request_timeout", "text": text}), flush=True)


def main():
    bootstrap, topic = sys.argv[1], sys.argv[2]
    count, gate, acked_path = int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
    request_timeout_ms = int(sys.argv[6])
    token = sys.argv[7] if len(sys.argv) > 7 else None
    producer_config = {
        "bootstrap.servers": bootstrap,
        "enable.idempotence": True,
        "acks": "all",
        "retries": 1000000,
        "retry.backoff.ms": 50,
        "retry.backoff.max.ms": 200,
        "reconnect.backoff.ms": 20,
        "reconnect.backoff.max.ms": 200,
        "message.timeout.ms": 120000,
        "linger.ms": 5,
        "batch.num.messages": 200,
        # The codec the kcat and kafka-python tests do not use.
        "compression.type": "snappy",
        "statistics.interval.ms": 100,
        "stats_cb": lambda text: stats(text),
        # A request in flight that long is given up: the connection is
        # closed and its batches are sent again on a new one.
        "request.timeout.ms": request_timeout_ms,
        "socket.timeout.ms": request_timeout_ms,
        "logger": Log(),
        "error_cb": lambda err: print(
            json.dumps({"event": "client_error", "name": err.name(), "text": err.str()}),
            flush=True,
        ),
    }
    if token is not None:
        producer_config.update(
            {
                "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanisms": "PLAIN",
                "sasl.username": "kappa-test",
                "sasl.password": token,
            }
        )
    producer = Producer(producer_config)
    acked_file = open(acked_path, "w", buffering=1)
    state = {"acked": 0, "failed": 0, "errors": [], "retransmitted": 0, "stats": 0}

    def stats(text):
        # Messages transmitted more than once (the batches in flight at the
        # kill, sent again): evidence that the run exercised the retries.
        partitions = [
            p
            for t in json.loads(text).get("topics", {}).values()
            for p in t["partitions"].values()
            if p["partition"] >= 0
        ]
        state["retransmitted"] = sum(p["txmsgs"] - p["msgs"] for p in partitions)
        state["stats"] += 1

    def report(err, msg):
        if err is not None:
            state["failed"] += 1
            if len(state["errors"]) < 20:
                state["errors"].append(str(err))
            return
        acked_file.write("%s\n" % json.loads(msg.value())["id"])
        state["acked"] += 1
        if state["acked"] % PROGRESS_EVERY == 0:
            acked_file.flush()
            print(json.dumps({"event": "acked", "count": state["acked"]}), flush=True)

    for i in range(count):
        if i == gate:
            print(json.dumps({"event": "gate", "acked": state["acked"]}), flush=True)
            # Keep serving delivery reports while waiting for the go-ahead.
            while not select.select([sys.stdin], [], [], 0.05)[0]:
                producer.poll(0)
            sys.stdin.readline()
        while i - (state["acked"] + state["failed"]) >= WINDOW:
            producer.poll(0.05)
        value = json.dumps({"id": i, "pad": "x" * 64})
        producer.produce(topic, key="k%d" % i, value=value, on_delivery=report)
        producer.poll(0)
    remaining = producer.flush(180)
    # Two statistics rounds after the flush, so the figure is final.
    seen = state["stats"]
    deadline = time.monotonic() + 5
    while state["stats"] < seen + 2 and time.monotonic() < deadline:
        producer.poll(0.05)
    acked_file.close()
    print(
        json.dumps(
            {
                "event": "done",
                "acked": state["acked"],
                "failed": state["failed"],
                "unflushed": remaining,
                "retransmitted": state["retransmitted"],
                "errors": state["errors"],
            }
        ),
        flush=True,
    )


if __name__ == "__main__":
    main()
