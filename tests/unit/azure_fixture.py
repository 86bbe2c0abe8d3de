#!/usr/bin/env python3
"""Token services and a blob endpoint for the azure_blob unit tests.

Usage: azure_fixture.py [key=value ...]
Listens on 127.0.0.1 on an ephemeral port, prints the port on the first
line of stdout, serves until killed or until its parent process exits.
Every request is CHECKED as the real service would need it; a request that
is not right gets 400 and a "BAD <why>" line in the log.

  POST /<tenant>/oauth2/v2.0/token   Microsoft Entra ID (client credentials):
       grant_type, client_id, scope; client_secret == secret, or
       client_assertion_type jwt-bearer and client_assertion == the contents
       of assertion_file (read at request time: it may rotate)
  GET  /metadata/identity/oauth2/token   IMDS: header Metadata: true,
       api-version=2018-02-01, resource, client_id == mi_client_id ("-": absent)
  GET  /msi/token                        App Service: X-IDENTITY-HEADER ==
       identity_header, api-version=2019-08-01, resource, client_id as above
  HEAD|GET /<account>/<container>/...    a blob of blob_size bytes; needs
       "Authorization: Bearer tok-..." of a token this fixture issued and
       x-ms-version >= 2017-11-09
  GET  /_log                             one line per request so far

Keys: tenant, client_id, secret, assertion_file, mi_client_id,
identity_header, ttl (token lifetime, s; default 3600), blob_size,
mode ("ok", "refuse": 400 invalid_client, "500": always 500).
Tokens are "tok-<kind>-<n>", n counting from 1 per kind.
"""
import json
import os
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

CFG = {"ttl": "3600", "blob_size": "1000", "mode": "ok", "mi_client_id": "-"}
LOCK = threading.Lock()
LOG = []
COUNTS = {}
ISSUED = set()
SCOPE = "https://storage.azure.com/.default"
RESOURCE = "https://storage.azure.com"


def note(line):
    with LOCK:
        LOG.append(line)


def issue(kind):
    with LOCK:
        COUNTS[kind] = COUNTS.get(kind, 0) + 1
        tok = "tok-%s-%d" % (kind, COUNTS[kind])
        ISSUED.add(tok)
    return tok


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def reply(self, status, obj=None, headers=()):
        body = json.dumps(obj, separators=(",", ":")).encode() if obj is not None else b""
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def bad(self, why):
        note("BAD %s %s" % (self.path.split("?")[0], why))
        self.reply(400, {"error": "invalid_request", "error_description": "fixture: " + why})

    def failing(self):
        mode = CFG["mode"]
        if mode == "refuse":
            note("REFUSED %s" % self.path.split("?")[0])
            self.reply(400, {"error": "invalid_client",
                             "error_description": "AADSTS7000215: Invalid client secret provided."})
            return True
        if mode == "500":
            note("500 %s" % self.path.split("?")[0])
            self.reply(500, {"error": "server_error"})
            return True
        return False

    def check_client_id(self, q):
        want = CFG["mi_client_id"]
        got = q.get("client_id", [None])[0]
        if want == "-" and got is not None:
            return "client_id %s sent for a system-assigned identity" % got
        if want != "-" and got != want:
            return "client_id %r, expected %r" % (got, want)
        return None

    def do_POST(self):
        u = urllib.parse.urlsplit(self.path)
        n = int(self.headers.get("Content-Length", "0"))
        form = urllib.parse.parse_qs(self.rfile.read(n).decode(), keep_blank_values=True)
        f = {k: v[0] for k, v in form.items()}
        if u.path != "/%s/oauth2/v2.0/token" % CFG.get("tenant"):
            return self.bad("path %s, tenant %s expected" % (u.path, CFG.get("tenant")))
        if not self.headers.get("Content-Type", "").startswith("application/x-www-form-urlencoded"):
            return self.bad("Content-Type %s" % self.headers.get("Content-Type"))
        if f.get("grant_type") != "client_credentials":
            return self.bad("grant_type %r" % f.get("grant_type"))
        if f.get("client_id") != CFG.get("client_id"):
            return self.bad("client_id %r" % f.get("client_id"))
        if f.get("scope") != SCOPE:
            return self.bad("scope %r" % f.get("scope"))
        if "client_secret" in f:
            if f["client_secret"] != CFG.get("secret"):
                return self.bad("wrong client_secret")
            kind = "secret"
        elif "client_assertion" in f:
            if f.get("client_assertion_type") != "urn:ietf:params:oauth:client-assertion-type:jwt-bearer":
                return self.bad("client_assertion_type %r" % f.get("client_assertion_type"))
            with open(CFG["assertion_file"]) as fh:
                want = fh.read().strip()
            if f["client_assertion"] != want:
                return self.bad("client_assertion is not the federated token")
            kind = "workload"
        else:
            return self.bad("neither client_secret nor client_assertion")
        if self.failing():
            return
        note("OK %s" % kind)
        self.reply(200, {"token_type": "Bearer", "expires_in": int(CFG["ttl"]),
                         "ext_expires_in": int(CFG["ttl"]), "access_token": issue(kind)})

    def identity(self, u, q):
        if u.path == "/metadata/identity/oauth2/token":
            kind, version = "imds", "2018-02-01"
            if self.headers.get("Metadata") != "true":
                return self.bad("no Metadata: true header")
        else:
            kind, version = "appservice", "2019-08-01"
            if self.headers.get("X-IDENTITY-HEADER") != CFG.get("identity_header"):
                return self.bad("wrong X-IDENTITY-HEADER")
        if q.get("api-version", [None])[0] != version:
            return self.bad("api-version %r" % q.get("api-version"))
        if q.get("resource", [None])[0] != RESOURCE:
            return self.bad("resource %r" % q.get("resource"))
        why = self.check_client_id(q)
        if why:
            return self.bad(why)
        if self.failing():
            return
        note("OK %s" % kind)
        now = int(time.time())
        ttl = int(CFG["ttl"])
        body = {"access_token": issue(kind), "token_type": "Bearer", "resource": RESOURCE,
                "expires_on": str(now + ttl) if kind == "imds" else now + ttl}
        if kind == "imds":
            body["expires_in"] = str(ttl)
        self.reply(200, body)

    def blob(self, u):
        auth = self.headers.get("Authorization", "")
        ver = self.headers.get("x-ms-version", "")
        with LOCK:
            known = auth[7:] in ISSUED
        if not auth.startswith("Bearer ") or not known:
            note("DENIED %s %s" % (self.command, u.path))
            return self.reply(403)
        if ver < "2017-11-09" or not self.headers.get("x-ms-date"):
            return self.bad("x-ms-version %r or no x-ms-date" % ver)
        note("OK blob %s %s %s" % (self.command, u.path, auth[7:]))
        size = int(CFG["blob_size"])
        self.send_response(200)
        self.send_header("Content-Length", str(size))
        self.end_headers()
        if self.command == "GET":
            self.wfile.write(b"x" * size)

    def do_HEAD(self):
        self.blob(urllib.parse.urlsplit(self.path))

    def do_GET(self):
        u = urllib.parse.urlsplit(self.path)
        q = urllib.parse.parse_qs(u.query, keep_blank_values=True)
        if u.path == "/_log":
            with LOCK:
                body = "".join(line + "\n" for line in LOG).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        elif u.path in ("/metadata/identity/oauth2/token", "/msi/token"):
            self.identity(u, q)
        else:
            self.blob(u)


def watch_parent(ppid):
    while os.getppid() == ppid:
        time.sleep(0.2)
    os._exit(0)


def main():
    for a in sys.argv[1:]:
        k, _, v = a.partition("=")
        CFG[k] = v
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    srv.daemon_threads = True
    threading.Thread(target=watch_parent, args=(os.getppid(),), daemon=True).start()
    print(srv.server_address[1], flush=True)
    srv.serve_forever()


if __name__ == "__main__":
    main()
