#!/usr/bin/env python3
"""A fault-injecting HTTP proxy for the S3 tests: forwards requests to an
upstream server (moto) and, by request number, answers an error status
instead, stalls, or drops the connection in the middle of the response body.
With --cert and --key it speaks TLS (HTTPS) to its clients.

usage: faultproxy.py PORT UPSTREAM_PORT [--fail-first N] [--fail-every K]
       [--status CODE] [--drop-every K] [--stall-every K] [--stall SECONDS]
       [--cert PEM --key PEM]
Prints "ready" once it listens.
"""
import argparse, http.client, socketserver, ssl, sys, threading, time
from http.server import BaseHTTPRequestHandler

parser = argparse.ArgumentParser()
parser.add_argument("port", type=int)
parser.add_argument("upstream", type=int)
parser.add_argument("--fail-first", type=int, default=0)
parser.add_argument("--fail-every", type=int, default=0)
parser.add_argument("--status", type=int, default=503)
parser.add_argument("--drop-every", type=int, default=0)
parser.add_argument("--stall-every", type=int, default=0)
parser.add_argument("--stall", type=float, default=5.0)
parser.add_argument("--cert")
parser.add_argument("--key")
args = parser.parse_args()

tls = None
if args.cert:
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls.load_cert_chain(args.cert, args.key)

lock = threading.Lock()
count = 0

class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def setup(self):
        # The handshake runs in the connection's own thread, so that a client
        # that fails it (the point of some tests) never holds up the others.
        if tls:
            self.request = tls.wrap_socket(self.request, server_side=True)
        super().setup()

    def handle_any(self):
        global count
        with lock:
            count += 1
            n = count
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        if n <= args.fail_first or (args.fail_every and n % args.fail_every == 0):
            payload = {503: b"<Error><Code>SlowDown</Code><Message>injected</Message></Error>",
                       429: b"<Error><Code>TooManyRequests</Code><Message>injected</Message></Error>",
                       403: b"<Error><Code>InvalidAccessKeyId</Code><Message>The AWS Access Key Id you provided does not exist in our records.</Message></Error>",
                       }.get(args.status, b"<Error><Code>InternalError</Code></Error>")
            self.send_response(args.status)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
            return
        if args.stall_every and n % args.stall_every == 0:
            time.sleep(args.stall)
        upstream = http.client.HTTPConnection("127.0.0.1", args.upstream, timeout=60)
        headers = {k: v for k, v in self.headers.items()}
        upstream.request(self.command, self.path, body=body, headers=headers)
        response = upstream.getresponse()
        data = response.read()
        self.send_response(response.status)
        for k, v in response.getheaders():
            if k.lower() not in ("transfer-encoding", "connection", "content-length"):
                self.send_header(k, v)
        self.send_header("Content-Length", str(len(data)))
        if args.drop_every and n % args.drop_every == 0 and len(data) > 1:
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(data[: len(data) // 2])
            self.wfile.flush()
            self.close_connection = True
            self.connection.shutdown(2)
            return
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = handle_any

class Server(socketserver.ThreadingMixIn, socketserver.TCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def handle_error(self, request, client_address):
        pass  # a failed handshake or a client gone: nothing to report

server = Server(("127.0.0.1", args.port), Handler)
print("ready", flush=True)
threading.Thread(target=lambda: (sys.stdin.read(), server.shutdown()), daemon=True).start()
server.serve_forever()
