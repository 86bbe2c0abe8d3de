#!/usr/bin/env python3
"""A forwarding proxy in front of Azurite for the t_azure_* tests.

Usage: azproxy.py UPSTREAM_PORT [--delay-put SECS] [--delay-range SECS]
                  [--cut-first-get] [--log FILE]
Listens on 127.0.0.1 on an ephemeral port, prints the port on the first
line of stdout. Requests go to 127.0.0.1:UPSTREAM_PORT unchanged (method,
path, query, headers, body), so Shared Key and SAS signatures still verify.

  --delay-put SECS   every PUT waits SECS before it is forwarded: a slow bucket
  --delay-range SECS every GET with a Range waits SECS before it is forwarded:
                     a slow link, on which a streaming reader is seen to get
                     its first part before the blob is all in
  --cut-first-get    the first GET of each blob gets its headers and half its
                     body, then the connection is closed: the client must
                     resume with a Range request
  --log FILE         one line per request: METHOD PATH COMP RANGE STATUS
                     (COMP: the comp= query parameter, or -)

Exits by itself after --lifetime seconds (default 900).
"""
import argparse
import http.client
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

A = None
LOCK = threading.Lock()
SEEN_GET = set()
HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade",
       "proxy-authorization", "proxy-authenticate"}


def note(line):
    if not A.log:
        return
    with LOCK, open(A.log, "a") as f:
        f.write(line + "\n")


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def forward(self):
        path = self.path
        blob = path.split("?")[0]
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n) if n else None
        if self.command == "PUT" and A.delay_put:
            time.sleep(A.delay_put)
        if self.command == "GET" and A.delay_range and self.headers.get("Range"):
            time.sleep(A.delay_range)
        cut = False
        if self.command == "GET" and A.cut_first_get and "comp=" not in path:
            with LOCK:
                cut = blob not in SEEN_GET
                SEEN_GET.add(blob)
        up = http.client.HTTPConnection("127.0.0.1", A.upstream, timeout=60)
        headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP}
        up.request(self.command, path, body=body, headers=headers)
        r = up.getresponse()
        data = r.read() if self.command != "HEAD" else b""
        comp = [q[5:] for q in path.partition("?")[2].split("&") if q.startswith("comp=")]
        note("%s %s %s %s %d" % (self.command, blob, comp[0] if comp else "-",
                                 self.headers.get("Range") or "-", r.status))
        self.send_response(r.status)
        for k, v in r.getheaders():
            if k.lower() not in HOP:
                self.send_header(k, v)
        if cut and r.status in (200, 206) and len(data) > 1:
            self.end_headers()
            self.wfile.write(data[: len(data) // 2])
            self.wfile.flush()
            self.close_connection = True
            note("CUT %s after %d bytes" % (blob, len(data) // 2))
        else:
            self.end_headers()
            self.wfile.write(data)
        up.close()

    do_GET = do_PUT = do_HEAD = do_DELETE = do_POST = forward


def main():
    global A
    ap = argparse.ArgumentParser()
    ap.add_argument("upstream", type=int)
    ap.add_argument("--delay-put", type=float, default=0)
    ap.add_argument("--delay-range", type=float, default=0)
    ap.add_argument("--cut-first-get", action="store_true")
    ap.add_argument("--log")
    ap.add_argument("--lifetime", type=float, default=900)
    A = ap.parse_args()
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    srv.daemon_threads = True
    threading.Timer(A.lifetime, lambda: os._exit(0)).start()
    print(srv.server_address[1], flush=True)
    sys.stdout.close()
    srv.serve_forever()


if __name__ == "__main__":
    main()
