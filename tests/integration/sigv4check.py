#!/usr/bin/env python3
"""Stdlib SigV4 verifier (header auth), and a verifying proxy in front of
an S3 that does not check signatures (s3rver).

Project copy of the testkit's sigv4check.py: the verification is the
same; forwarding, faults and a request log are added for the
integration tests.

Usage: sigv4check.py PORT SECRET [--upstream URL] [--log FILE]
                     [--delay-writes SECONDS] [--cut-first-get]
PORT 0 picks a free port, printed on the first line of stdout. Listens
on 127.0.0.1 only.

Every request's Authorization signature is checked with SECRET. A
mismatch answers 403 with the canonical request and is never forwarded.
Without --upstream a match answers 200 "OK"; with it the request goes on
to the upstream and its answer comes back.
  --log FILE          appends "METHOD PATH?QUERY STATUS OK|MISMATCH" lines
  --delay-writes S    PUT and POST answers wait S seconds (a slow bucket)
  --cut-first-get     the first GET of each path sends half of its body,
                      then the connection is closed (a broken transfer)
"""
import argparse
import hashlib
import hmac
import http.client
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ARGS = None
LOCK = threading.Lock()
SEEN_GETS = set()
PASS_HEADERS = ("content-type", "etag", "content-range", "last-modified",
                "accept-ranges", "x-amz-request-id")


def h(k, m): return hmac.new(k, m.encode(), hashlib.sha256).digest()


def enc(s): return urllib.parse.quote(s, safe="-_.~")


def verify(handler, body):
    """(ok, canonical request) as the original sigv4check.py computes them."""
    auth = handler.headers.get("Authorization", "")
    try:
        parts = dict(p.strip().split("=", 1) for p in auth.split(" ", 1)[1].split(","))
        cred = parts["Credential"].split("/")
        signed = parts["SignedHeaders"].split(";")
        path, _, query = handler.path.partition("?")
        qs = urllib.parse.parse_qsl(query, keep_blank_values=True)
        cq = "&".join("%s=%s" % (enc(k), enc(v)) for k, v in sorted(qs))
        ch = "".join("%s:%s\n" % (k, " ".join(handler.headers.get(k, "").split())) for k in signed)
        payload = handler.headers.get("x-amz-content-sha256") or hashlib.sha256(body).hexdigest()
        creq = "\n".join([handler.command, path, cq, ch, ";".join(signed), payload])
        amzdate = handler.headers.get("x-amz-date")
        sts = "\n".join(["AWS4-HMAC-SHA256", amzdate, "/".join(cred[1:]),
                         hashlib.sha256(creq.encode()).hexdigest()])
        k = h(("AWS4" + ARGS.secret).encode(), cred[1])
        for x in cred[2:]:
            k = h(k, x)
        sig = hmac.new(k, sts.encode(), hashlib.sha256).hexdigest()
        return sig == parts["Signature"], creq
    except Exception as e:  # a request this verifier cannot even parse
        return False, "parse error: %r" % e


class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def note(self, status, verdict):
        if ARGS.log:
            with LOCK, open(ARGS.log, "a") as f:
                f.write("%s %s %d %s\n" % (self.command, self.path, status, verdict))

    def reply(self, status, msg):
        self.send_response(status)
        self.send_header("Content-Length", str(len(msg)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(msg)

    def handle_any(self):
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n) if n else b""
        ok, creq = verify(self, body)
        if not ok:
            self.note(403, "MISMATCH")
            return self.reply(403, ("MISMATCH\n" + creq + "\n").encode())
        if not ARGS.upstream:
            self.note(200, "OK")
            return self.reply(200, b"OK\n")
        if ARGS.delay_writes and self.command in ("PUT", "POST"):
            time.sleep(ARGS.delay_writes)
        self.forward(body)

    def forward(self, body):
        up = urllib.parse.urlsplit(ARGS.upstream)
        conn = http.client.HTTPConnection(up.hostname, up.port, timeout=120)
        headers = {k: v for k, v in self.headers.items()
                   if k.lower() not in ("connection", "keep-alive", "expect")}
        try:
            conn.request(self.command, self.path, body=body if body or self.command in ("PUT", "POST") else None,
                         headers=headers)
            resp = conn.getresponse()
            data = resp.read()
        except OSError as e:
            conn.close()
            self.note(502, "OK")
            return self.reply(502, ("upstream: %s\n" % e).encode())
        conn.close()
        self.note(resp.status, "OK")
        self.send_response(resp.status)
        for k, v in resp.getheaders():
            if k.lower() in PASS_HEADERS:
                self.send_header(k, v)
        length = resp.getheader("Content-Length")
        if self.command == "HEAD":
            self.send_header("Content-Length", length or "0")
            self.end_headers()
            return
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        cut = False
        if ARGS.cut_first_get and self.command == "GET" and resp.status in (200, 206) and len(data) > 1:
            with LOCK:
                path = self.path.split("?", 1)[0]
                cut = path not in SEEN_GETS
                SEEN_GETS.add(path)
        if cut:
            self.wfile.write(data[: len(data) // 2])
            self.wfile.flush()
            self.close_connection = True
            self.connection.shutdown(2)
            return
        self.wfile.write(data)

    do_GET = do_PUT = do_POST = do_HEAD = do_DELETE = handle_any


class Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        if not isinstance(sys.exc_info()[1], OSError):
            super().handle_error(request, client_address)


def main():
    global ARGS
    ap = argparse.ArgumentParser()
    ap.add_argument("port", type=int)
    ap.add_argument("secret", nargs="?", default="S3RVER")
    ap.add_argument("--upstream")
    ap.add_argument("--log")
    ap.add_argument("--delay-writes", type=float, default=0)
    ap.add_argument("--cut-first-get", action="store_true")
    ARGS = ap.parse_args()
    srv = Server(("127.0.0.1", ARGS.port), H)
    print(srv.server_address[1], flush=True)
    srv.serve_forever()


if __name__ == "__main__":
    main()
