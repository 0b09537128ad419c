"""What the Python benchmarks (bench-nodes.py, bench-nexmark.py,
bench-nexmark-ab.py) share: a free loopback port, a process's CPU seconds
(whole and per thread), and a release `kappa serve` they start and talk
HTTP to over one keep-alive connection."""

import http.client
import json
import os
import socket
import subprocess


def free_port():
    """A free TCP port on 127.0.0.1."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def user_and_system_seconds(stat_path):
    """(utime, stime) in seconds from a /proc `stat` file (a process's or
    a thread's)."""
    with open(stat_path) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tick, int(fields[12]) / tick


def cpu_seconds(pid):
    """utime + stime of a process, in seconds (/proc/<pid>/stat)."""
    return sum(user_and_system_seconds(f"/proc/{pid}/stat"))


def thread_cpu_seconds(pid):
    """{(thread id, thread name): (utime, stime)} of a process's threads, in
    seconds (/proc/<pid>/task/*/stat); a thread that ends while read is
    left out."""
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                name = f.read().strip()
            out[(tid, name)] = user_and_system_seconds(f"/proc/{pid}/task/{tid}/stat")
        except OSError:
            continue
    return out


class KappaServer:
    """`kappa serve` started with `args` (after the binary), its stderr in
    `log_path`; returns once it printed that it is listening on `port`."""

    def __init__(self, args, port, log_path):
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        self.log = open(log_path, "w")
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=self.log, text=True)
        line = self.proc.stdout.readline()
        assert "listening on" in line, line
        self.conn = None

    def request(self, method, path, body=None, ctype=None):
        """(status, JSON body or None); one retry on a new connection."""
        for _ in range(2):
            try:
                if self.conn is None:
                    self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
                headers = {"content-type": ctype} if ctype else {}
                self.conn.request(method, path, body=body, headers=headers)
                r = self.conn.getresponse()
                data = r.read()
                return r.status, (json.loads(data) if data else None)
            except (ConnectionError, http.client.HTTPException, OSError):
                self.conn = None
        raise RuntimeError(f"{self.url}: no answer")

    def sql(self, text):
        """Runs statements; raises unless answered 200."""
        status, body = self.request("POST", "/v1/statements", text.encode(), "application/sql")
        if status != 200:
            raise RuntimeError(f"{text!r}: {status} {body}")
        return body
