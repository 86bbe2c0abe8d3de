#!/usr/bin/env python3
"""A fault-injecting HTTP/1.1 origin for the datavofs fault tests.

Serves ROOT (an origin directory: datasets.json, manifests, shards/) on
127.0.0.1 with keep-alive, ETag-less GET/HEAD and single byte ranges
("bytes=S-" and "bytes=S-E"), as a static server or CDN would, and breaks
shard answers on request. Only shard requests (.../shards/<hash>.tar) are
ever faulted: documents are always served as they are.

Which fault, per shard:
  * a control file (--control FILE, JSON, re-read whenever it changes):
        {"<content_hash>": "SPEC", "*": "SPEC"}
    a key is a content hash (or the file name "<hash>.tar"); "*" applies to
    shards without a key of their own. Rewriting the file resets the
    per-shard request counters.
  * a URL-path prefix: /f/SPEC/shards/<hash>.tar (an origin URL of
    http://127.0.0.1:PORT/f/SPEC makes every shard of that mount faulty).
    The prefix wins over the control file.

SPEC is "KIND[,key=value...]". Every kind takes times=N (only the first N
requests of that shard are faulted, the later ones served; default: all)
and p=P (each request faulted with probability P; default 1); with
times=N, then=KIND faults the later requests with KIND instead; from=B
faults only the requests whose range starts at byte B or later (the
chunks of a streaming fill from one on).
  status    code=500|503|... answer that status with a short body
  hang      read the request, never answer (until the client goes away)
  stall     send the headers and `at` bytes of body, then nothing
  reset     send the headers and `at` bytes of body (default: half), then
            a TCP reset (SO_LINGER 0)
  truncate  announce the full Content-Length, send `at` bytes (default:
            half), then close cleanly
  badlen    announce a Content-Length off by `delta` (default +1000) bytes,
            send the body as it is, then close
  corrupt   flip the byte at offset `at` of the file (default: the middle)
  trickle   send the body at `rate` bytes per second (default 1024)
  redirect  302 to the same URL, forever (a redirect loop)
  bigheaders  a 200 whose headers pass any sane limit (`lines`, default
            400 lines of 1000 bytes)
  norange   ignore Range: answer 200 with the whole body
  random    kinds=K1|K2|... (default status|reset|truncate|corrupt): pick
            one of them (with its default parameters) for each faulted
            request; used by the soak with p=...

Every request is logged, one line each, to --log (before the body is
sent, so a hanging or trickling request is already counted):
  <unix time> <method> <path> <status> <fault or -> <range or -> <body bytes sent>
and the bound port is written to --port-file once listening.

usage: origin.py --root DIR [--port N] [--port-file F] [--control F] [--log F]
"""
import argparse
import json
import os
import random
import re
import select
import socket
import struct
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

SHARD_RE = re.compile(r"(?:^|/)shards/([0-9a-f]{32,64})\.tar$")
RANDOM_KINDS = ["status", "reset", "truncate", "corrupt"]
KINDS = {"status", "hang", "stall", "reset", "truncate", "badlen", "corrupt",
         "trickle", "redirect", "bigheaders", "norange", "random", "none"}


def parse_spec(spec):
    """'reset,times=1,at=100' -> ('reset', {'times': '1', 'at': '100'})"""
    parts = [p for p in spec.strip().split(",") if p]
    if not parts:
        return None
    kind, params = parts[0], {}
    for p in parts[1:]:
        k, _, v = p.partition("=")
        params[k.strip()] = v.strip()
    if kind not in KINDS:
        raise ValueError("unknown fault kind %r" % kind)
    return kind, params


class Faults:
    """The control file, re-read when it changes, and per-shard counters."""

    def __init__(self, path):
        self.path = path
        self.lock = threading.Lock()
        self.stamp = None
        self.table = {}
        self.counts = {}
        self.rng = random.Random(int(os.environ.get("DV_FAULT_SEED", "0")) or None)

    def _reload(self):
        if not self.path:
            return
        try:
            st = os.stat(self.path)
            stamp = (st.st_mtime_ns, st.st_size, st.st_ino)
        except FileNotFoundError:
            stamp = None
        if stamp == self.stamp:
            return
        self.stamp = stamp
        self.counts = {}
        self.table = {}
        if stamp is None:
            return
        try:
            with open(self.path) as f:
                raw = json.load(f)
        except (OSError, ValueError) as e:
            sys.stderr.write("origin.py: bad control file: %s\n" % e)
            return
        for k, v in raw.items():
            k = k[:-4] if k.endswith(".tar") else k
            self.table[k] = parse_spec(v) if v else None

    def pick(self, shard, prefix_spec):
        """The fault for this request of @shard, as (kind, params), or None."""
        with self.lock:
            self._reload()
            n = self.counts.get(shard, 0) + 1
            self.counts[shard] = n
            if prefix_spec is not None:
                spec = prefix_spec
            else:
                spec = self.table.get(shard, self.table.get("*"))
            if not spec:
                return None
            kind, params = spec
            if "times" in params and n > int(params["times"]):
                if "then" not in params:
                    return None
                kind, params = params["then"], {}
            if "p" in params and self.rng.random() >= float(params["p"]):
                return None
            if kind == "random":
                kinds = params.get("kinds", "|".join(RANDOM_KINDS)).split("|")
                return self.rng.choice(kinds), {}
            if kind == "none":
                return None
            return kind, params


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "faultorigin/1"
    sys_version = ""

    def log_message(self, fmt, *args):
        pass

    # ---- helpers ----
    def _log(self, status, fault, rng, sent):
        line = "%.3f %s %s %s %s %s %d\n" % (
            time.time(), self.command, self.path, status, fault or "-",
            (rng or "-").replace(" ", ""), sent)
        with self.server.log_lock:
            self.server.log.write(line)
            self.server.log.flush()

    def _simple(self, code, body=b"", extra=()):
        self.send_response(code)
        self.send_header("Content-Length", str(len(body)))
        for k, v in extra:
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)
        return len(body)

    def _resolve(self, urlpath):
        rel = urllib.parse.unquote(urlpath).lstrip("/")
        parts = rel.split("/")
        if any(p in ("", ".", "..") for p in parts) and rel != "":
            return None
        path = os.path.join(self.server.root, *parts) if rel else self.server.root
        return path if os.path.isfile(path) else None

    def _range(self, size):
        """(start, end) from a Range header, None for the whole body, or 'bad'."""
        h = self.headers.get("Range")
        if not h:
            return None
        m = re.fullmatch(r"\s*bytes=(\d+)-(\d*)\s*", h)
        if not m:
            return None
        start = int(m.group(1))
        end = int(m.group(2)) if m.group(2) else size - 1
        if start >= size:
            return "bad"
        return start, min(end, size - 1)

    def _hold(self, secs=600):
        """Waits until the client closes the connection (or secs pass)."""
        end = time.time() + secs
        sock = self.connection
        while time.time() < end:
            r, _, _ = select.select([sock], [], [], 0.5)
            if r:
                try:
                    if not sock.recv(4096, socket.MSG_PEEK):
                        return
                    sock.recv(4096)
                except OSError:
                    return

    def _reset(self):
        try:
            self.wfile.flush()
        except OSError:
            pass
        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                   struct.pack("ii", 1, 0))
        self.close_connection = True
        try:
            self.connection.close()
        except OSError:
            pass

    # ---- requests ----
    def do_HEAD(self):
        self.do_GET()

    def do_GET(self):
        urlpath = urllib.parse.urlsplit(self.path).path
        prefix_spec = None
        m = re.match(r"^/f/([^/]+)(/.*)$", urlpath)
        if m:
            prefix_spec = parse_spec(urllib.parse.unquote(m.group(1))) or ("none", {})
            urlpath = m.group(2)
        path = self._resolve(urlpath)
        if path is None:
            self._log(404, None, None, self._simple(404, b"not found\n"))
            return
        with open(path, "rb") as f:
            data = f.read()
        sm = SHARD_RE.search(urlpath)
        fault = self.server.faults.pick(sm.group(1), prefix_spec) if sm else None
        try:
            self._serve(data, fault)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def _serve(self, data, fault):
        kind, params = fault if fault else (None, {})
        size = len(data)
        rng = self._range(size) if kind != "norange" else None
        rng_text = self.headers.get("Range")
        if rng == "bad":
            sent = self._simple(416, b"", [("Content-Range", "bytes */%d" % size)])
            self._log(416, kind, rng_text, sent)
            return
        start, end = rng if rng else (0, size - 1)
        if kind and "from" in params and start < int(params["from"]):
            kind, params = None, {}  # the fault starts at byte `from`
        if kind == "corrupt":
            at = int(params.get("at", size // 2))
            b = bytearray(data)
            if 0 <= at < size:
                b[at] ^= 0xFF
            data = bytes(b)
        body = data[start:end + 1] if size else b""
        if kind == "status":
            code = int(params.get("code", 503))
            self._log(code, "status%d" % code, rng_text,
                      self._simple(code, b"injected fault\n"))
            return
        if kind == "hang":
            self._log("-", kind, rng_text, 0)
            self._hold()
            self.close_connection = True
            return
        if kind == "redirect":
            self._log(302, kind, rng_text,
                      self._simple(302, b"", [("Location", self.path)]))
            return
        code = 206 if rng else 200
        length = len(body)
        if kind == "badlen":
            length = max(0, length + int(params.get("delta", 1000)))
        self.send_response(code)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(length))
        self.send_header("Accept-Ranges", "bytes")
        if rng:
            self.send_header("Content-Range", "bytes %d-%d/%d" % (start, end, size))
        if kind == "bigheaders":
            filler = "x" * int(params.get("width", 1000))
            for i in range(int(params.get("lines", 400))):
                self.send_header("X-Filler-%d" % i, filler)
        if kind in ("badlen", "truncate", "reset", "stall"):
            self.send_header("Connection", "close")
            self.close_connection = True
        if kind == "bigheaders" and self.command != "HEAD":
            # Logged first: the client gives up while the headers are still
            # going out, and the failed write would skip the log line.
            self._log(code, kind, rng_text, 0)
            self.close_connection = True
            try:
                self.end_headers()
                self.wfile.write(body)
            except OSError:
                pass
            return
        self.end_headers()
        if self.command == "HEAD":
            self._log(code, kind, rng_text, 0)
            return
        if kind in ("truncate", "reset", "stall"):
            cut = min(len(body), int(params.get("at", len(body) // 2)))
            self._log(code, kind, rng_text, cut)
            self.wfile.write(body[:cut])
            self.wfile.flush()
            if kind == "reset":
                self._reset()
            elif kind == "stall":
                self._hold()
            return
        if kind == "badlen":
            self.wfile.write(body[:length])
            self._log(code, kind, rng_text, min(length, len(body)))
            return
        if kind == "trickle":
            # Logged first: a test counts requests while this one runs.
            self._log(code, kind, rng_text, len(body))
            rate = max(1, int(params.get("rate", 1024)))
            step = max(1, rate // 8)
            for i in range(0, len(body), step):
                self.wfile.write(body[i:i + step])
                self.wfile.flush()
                time.sleep(step / rate)
            return
        self.wfile.write(body)
        self._log(code, kind, rng_text, len(body))


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", required=True)
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--port-file")
    ap.add_argument("--control")
    ap.add_argument("--log", default=os.devnull)
    a = ap.parse_args()
    srv = Server(("127.0.0.1", a.port), Handler)
    srv.root = os.path.abspath(a.root)
    srv.faults = Faults(a.control)
    srv.log = open(a.log, "a")
    srv.log_lock = threading.Lock()
    port = srv.server_address[1]
    if a.port_file:
        tmp = a.port_file + ".tmp"
        with open(tmp, "w") as f:
            f.write("%d\n" % port)
        os.rename(tmp, a.port_file)
    try:
        srv.serve_forever(poll_interval=0.2)
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
