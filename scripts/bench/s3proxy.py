#!/usr/bin/env python3
"""A counting HTTP proxy in front of an S3 server (moto) for the benchmarks:
every request relayed to the upstream port, and counted with the bytes of
its response body (what a reader fetched) and of its request body (what a
writer sent). Standard library only; import it (`start(upstream_port)`) or
run it (`s3proxy.py PORT UPSTREAM_PORT`: prints "ready", then on each line
"count" read from stdin prints "REQUESTS RESPONSE_BYTES REQUEST_BYTES", on
"reset" zeroes them; ends at end of input).

The fleet benchmark's own proxy (fleet_bench.py) counts requests per
bucket; this one counts bytes too, and streams bodies instead of holding
them (a restore's ranged reads can be large)."""
import http.client, http.server, socket, sys, threading


class Counts:
    """Requests and bytes relayed since the last reset (thread-safe)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.reset()

    def reset(self):
        with getattr(self, "lock"):
            self.requests = 0
            self.response_bytes = 0
            self.request_bytes = 0
            self.gets = 0

    def add(self, method, sent, received):
        with self.lock:
            self.requests += 1
            self.gets += method == "GET"
            self.request_bytes += sent
            self.response_bytes += received

    def snapshot(self):
        with self.lock:
            return {"requests": self.requests, "gets": self.gets, "response_bytes": self.response_bytes,
                    "request_bytes": self.request_bytes}


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


class Proxy:
    def __init__(self, upstream_port, port=None):
        self.counts = Counts()
        self.port = port or free_port()
        counts = self.counts

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def relay(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                    chunks = []
                    while True:
                        size = int(self.rfile.readline().strip().split(b";")[0], 16)
                        if size == 0:
                            self.rfile.readline()
                            break
                        chunks.append(self.rfile.read(size))
                        self.rfile.readline()
                    body = b"".join(chunks)
                headers = {k: v for k, v in self.headers.items() if k.lower() not in ("transfer-encoding", "connection")}
                if body is not None:
                    headers["Content-Length"] = str(len(body))
                c = http.client.HTTPConnection("127.0.0.1", upstream_port, timeout=300)
                try:
                    c.request(self.command, self.path, body=body, headers=headers)
                    r = c.getresponse()
                    self.send_response(r.status)
                    size = r.getheader("Content-Length")
                    data = None
                    if size is None:  # read it whole to know its length
                        data = r.read()
                        size = len(data)
                    for k, v in r.getheaders():
                        if k.lower() not in ("transfer-encoding", "connection", "content-length"):
                            self.send_header(k, v)
                    self.send_header("Content-Length", str(size))
                    self.end_headers()
                    received = 0
                    if self.command != "HEAD":
                        if data is not None:
                            self.wfile.write(data)
                            received = len(data)
                        else:
                            while True:
                                piece = r.read(1 << 20)
                                if not piece:
                                    break
                                self.wfile.write(piece)
                                received += len(piece)
                    counts.add(self.command, len(body or b""), received)
                finally:
                    c.close()

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = relay

        class Server(http.server.ThreadingHTTPServer):
            def handle_error(self, request, client_address):
                pass  # a client gone mid-answer (a reader that stopped early): nothing to report

        self.server = Server(("127.0.0.1", self.port), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def endpoint(self):
        return f"http://127.0.0.1:{self.port}"

    def stop(self):
        self.server.shutdown()


def start(upstream_port, port=None):
    """A running proxy (its `endpoint`, `counts`); it stops with the process or at `stop()`."""
    return Proxy(upstream_port, port)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: s3proxy.py PORT UPSTREAM_PORT")
    proxy = start(int(sys.argv[2]), int(sys.argv[1]))
    print("ready", flush=True)
    for line in sys.stdin:
        if line.strip() == "count":
            s = proxy.counts.snapshot()
            print(s["requests"], s["response_bytes"], s["request_bytes"], flush=True)
        elif line.strip() == "reset":
            proxy.counts.reset()
            print("ok", flush=True)
