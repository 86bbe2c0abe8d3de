#!/usr/bin/env python3
"""An HTTP/1.1 origin for the unit tests, with faults on demand.

Usage: httpd_fixture.py ROOT
Listens on 127.0.0.1 on an ephemeral port, prints the port on the first
line of stdout, serves until killed.

Files under ROOT are served with Range (bytes=S- and bytes=S-E), ETag and
If-None-Match, like a real static server. A path /m/<mode>/<rest> serves
ROOT/<rest> with a fault; a "-tag" suffix on the mode is ignored, so a
test can keep its own request counters (they are per full path):

  ok        no fault
  403       always 403
  500once   500 on the first request, then normal
  429wait   429 with "Retry-After: 1" on the first request, then normal
  reset     first request: full Content-Length, half the body, then the
            connection is closed; later requests normal (Range honoured)
  rst       as reset, but the connection is aborted with a TCP RST
  reset200  as reset, later requests ignore Range and answer 200
  badrange  as reset, later requests answer 206 from byte 0
  big       Content-Length and body 1 MiB longer than the file
  bigclose  no Content-Length, body 1 MiB longer, then close
  wrong     right length, one byte changed
  hang      headers and 512 bytes of the body, then silence
  trickle   the body at 4 KiB/s: above any low-speed limit, below the deadline
  redirect  302 to /m/ok/<rest>
  redirftp  302 to an ftp:// URL

GET /_log lists the requests so far, one per line: "<mode> <rest> <range> <status>".
"""
import os
import socket
import struct
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ROOT = None
LOCK = threading.Lock()
IDLE = threading.Condition(LOCK)
INFLIGHT = [0]  # requests being answered, not yet in LOG
HITS = {}
LOG = []
EXTRA = 1 << 20


def note(mode, rest, rng, status):
    with LOCK:
        LOG.append("%s %s %s %d" % (mode, rest, rng or "-", status))


def parse_range(header, size):
    """(start, end) inclusive, or None when absent or not understood."""
    if not header or not header.startswith("bytes="):
        return None
    spec = header[6:]
    if "," in spec or "-" not in spec:
        return None
    a, b = spec.split("-", 1)
    if not a.isdigit():
        return None
    start = int(a)
    end = int(b) if b.isdigit() else size - 1
    return start, min(end, size - 1)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_GET(self):
        self.serve(body=True)

    def do_HEAD(self):
        self.serve(body=False)

    def send_simple(self, status, text=b"", headers=()):
        self.send_response(status)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(text)))
        self.end_headers()
        self.wfile.write(text)

    def serve(self, body):
        path = self.path.split("?", 1)[0]
        if path == "/_log":
            # A client that has its answer may ask for the log before the
            # handler wrote the line: wait (briefly: "hang" never ends).
            with IDLE:
                IDLE.wait_for(lambda: INFLIGHT[0] == 0, timeout=2)
                text = ("\n".join(LOG) + "\n").encode()
            self.send_simple(200, text)
            return
        with LOCK:
            INFLIGHT[0] += 1
        try:
            self.serve_file(path, body)
        finally:
            with IDLE:
                INFLIGHT[0] -= 1
                IDLE.notify_all()

    def serve_file(self, path, body):
        mode, rest = "ok", path.lstrip("/")
        if path.startswith("/m/"):
            parts = path[3:].split("/", 1)
            mode = parts[0].split("-", 1)[0]
            rest = parts[1] if len(parts) > 1 else ""
        with LOCK:
            HITS[path] = HITS.get(path, 0) + 1
            count = HITS[path]
        rng = self.headers.get("Range")
        status = self.answer(mode, rest, count, rng, body)
        note(mode, rest, rng, status)

    def answer(self, mode, rest, count, rng, body):
        if mode == "403":
            self.send_simple(403, b"forbidden\n")
            return 403
        if mode == "500once" and count == 1:
            self.send_simple(500, b"try again\n")
            return 500
        if mode == "429wait" and count == 1:
            self.send_simple(429, b"slow down\n", headers=[("Retry-After", "1")])
            return 429
        if mode == "redirect":
            self.send_simple(302, headers=[("Location", "/m/ok/" + rest)])
            return 302
        if mode == "redirftp":
            self.send_simple(302, headers=[("Location", "ftp://127.0.0.1/" + rest)])
            return 302
        full = os.path.normpath(os.path.join(ROOT, rest))
        if ".." in rest.split("/") or not os.path.isfile(full):
            self.send_simple(404, b"not found\n")
            return 404
        with open(full, "rb") as f:
            data = f.read()
        st = os.stat(full)
        etag = '"%x-%x"' % (st.st_mtime_ns, st.st_size)
        if self.headers.get("If-None-Match") == etag:
            self.send_response(304)
            self.send_header("ETag", etag)
            self.end_headers()
            return 304
        return self.send_data(mode, count, data, etag, rng, body)

    def send_data(self, mode, count, data, etag, rng, body):
        size = len(data)
        cut = mode in ("reset", "rst", "reset200", "badrange") and count == 1
        if mode == "wrong":
            data = bytes([data[0] ^ 0xFF]) + data[1:]
        if mode == "big":
            data = data + b"\0" * EXTRA
        if mode == "bigclose":
            return self.send_unsized(data + b"\0" * EXTRA)
        r = parse_range(rng, size)
        if mode == "reset200":
            r = None
        if mode == "badrange" and r is not None:
            r = (0, size - 1)
        status = 200
        if r is not None:
            start, end = r
            if start >= size:
                self.send_simple(416, headers=[("Content-Range", "bytes */%d" % size)])
                return 416
            status = 206
            part = data[start:end + 1]
        else:
            part = data
        self.send_response(status)
        self.send_header("Content-Length", str(len(part)))
        self.send_header("ETag", etag)
        self.send_header("Accept-Ranges", "bytes")
        if status == 206:
            self.send_header("Content-Range", "bytes %d-%d/%d" % (start, end, size))
        self.end_headers()
        if not body:
            return status
        if cut:
            self.wfile.write(part[: len(part) // 2])
            self.wfile.flush()
            self.drop(mode == "rst")
            return status
        if mode == "trickle":
            for i in range(0, len(part), 1024):
                self.wfile.write(part[i:i + 1024])
                self.wfile.flush()
                time.sleep(0.25)
            return status
        if mode == "hang":
            self.wfile.write(part[:512])
            self.wfile.flush()
            time.sleep(120)
            self.close_connection = True
            return status
        self.wfile.write(part)
        return status

    def send_unsized(self, data):
        self.send_response(200)
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()
        self.close_connection = True
        return 200

    def drop(self, rst):
        self.close_connection = True
        sock = self.connection
        if rst:
            # Closing with a zero linger sends RST, not FIN.
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            os.close(sock.detach())
        else:
            sock.shutdown(socket.SHUT_RDWR)


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def handle_error(self, request, client_address):
        # Clients that abort a transfer on purpose are part of the tests.
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


def main():
    global ROOT
    ROOT = os.path.abspath(sys.argv[1])
    srv = Server(("127.0.0.1", 0), Handler)
    sys.stdout.write("%d\n" % srv.server_address[1])
    sys.stdout.flush()
    srv.serve_forever()


if __name__ == "__main__":
    main()
