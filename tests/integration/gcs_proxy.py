#!/usr/bin/env python3
"""A reverse proxy in front of the GCS emulator, for the t_gcs_* tests.

Usage: gcs_proxy.py UPSTREAM_PORT --log FILE [options]
Listens on 127.0.0.1 on an ephemeral port and prints it on the first line
of stdout. Every request is forwarded to 127.0.0.1:UPSTREAM_PORT with its
Host header, so that the emulator's upload session URIs point back here.
Standard library only.

  --log FILE          one line a request: "METHOD PATH RANGE STATUS AUTH"
                      (AUTH: bearer or none; never the token itself)
  --delay-upload S    hold every /upload/ request S seconds first (a slow bucket)
  --cut-media N       the first N ?alt=media GETs send half the body, then close
  --drop-range        forward ?alt=media GETs without their Range header
                      (the emulator then answers 200 with the whole object)
  --tokens FILE       bucket requests need "Authorization: Bearer T" with T a
                      line of FILE (tokens a test token service issued), else
                      401; a session PUT (upload_id=) needs none, as in GCS
  --deny              answer every bucket request 403 (wrong credentials)
"""
import argparse
import http.client
import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ARGS = None
LOCK = threading.Lock()
CUTS = [0]
HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade",
       "proxy-connection", "content-length"}


def note(line):
    with LOCK, open(ARGS.log, "a") as f:
        f.write(line + "\n")


def tokens():
    try:
        with open(ARGS.tokens) as f:
            return {line.strip() for line in f if line.strip()}
    except OSError:
        return set()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_GET(self):
        self.forward()

    def do_POST(self):
        self.forward()

    def do_PUT(self):
        self.forward()

    def do_DELETE(self):
        self.forward()

    def reply(self, status, body, headers=()):
        self.send_response(status)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def refused(self):
        """The status to answer instead of forwarding, or 0."""
        if ARGS.deny:
            return 403
        if not ARGS.tokens or "upload_id=" in self.path:
            return 0
        h = self.headers.get("Authorization") or ""
        return 0 if h.startswith("Bearer ") and h[7:] in tokens() else 401

    def forward(self):
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n) if n else b""
        auth = "bearer" if (self.headers.get("Authorization") or "").startswith("Bearer ") else "none"
        rng = self.headers.get("Range") or self.headers.get("Content-Range") or "-"
        status = self.refused()
        if status:
            msg = {"error": {"code": status, "message": "proxy: caller does not have storage.objects access"
                             if status == 403 else "proxy: Invalid Credentials"}}
            self.reply(status, json.dumps(msg).encode(), [("Content-Type", "application/json")])
            note("%s %s %s %d %s" % (self.command, self.path, rng, status, auth))
            return
        if ARGS.delay_upload and self.path.startswith("/upload/"):
            time.sleep(ARGS.delay_upload)
        media = self.command == "GET" and "alt=media" in self.path
        headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP}
        if media and ARGS.drop_range:
            headers.pop("Range", None)
        conn = http.client.HTTPConnection("127.0.0.1", ARGS.upstream, timeout=60)
        try:
            conn.request(self.command, self.path, body=body if (body or self.command in ("POST", "PUT")) else None,
                         headers=headers)
            resp = conn.getresponse()
            data = resp.read()
        except OSError as e:
            self.reply(502, str(e).encode())
            note("%s %s %s 502 %s" % (self.command, self.path, rng, auth))
            return
        finally:
            conn.close()
        cut = False
        if media and resp.status in (200, 206):
            with LOCK:
                if CUTS[0] < ARGS.cut_media:
                    CUTS[0] += 1
                    cut = True
        self.send_response(resp.status)
        for k, v in resp.getheaders():
            if k.lower() not in HOP:
                self.send_header(k, v)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if cut:
            self.wfile.write(data[: len(data) // 2])
            self.wfile.flush()
            self.close_connection = True
            self.connection.shutdown(2)
            note("%s %s %s %d-cut %s" % (self.command, self.path, rng, resp.status, auth))
            return
        self.wfile.write(data)
        note("%s %s %s %d %s" % (self.command, self.path, rng, resp.status, auth))


class Server(ThreadingHTTPServer):
    daemon_threads = True


def main():
    global ARGS
    p = argparse.ArgumentParser()
    p.add_argument("upstream", type=int)
    p.add_argument("--log", required=True)
    p.add_argument("--delay-upload", type=float, default=0)
    p.add_argument("--cut-media", type=int, default=0)
    p.add_argument("--drop-range", action="store_true")
    p.add_argument("--tokens")
    p.add_argument("--deny", action="store_true")
    ARGS = p.parse_args()
    srv = Server(("127.0.0.1", 0), Handler)
    print(srv.server_address[1], flush=True)
    srv.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
