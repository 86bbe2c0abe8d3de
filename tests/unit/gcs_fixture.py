#!/usr/bin/env python3
"""Google's token services and a GCS JSON API bucket, for the GCS tests.

Usage: gcs_fixture.py STATE_DIR
Listens on 127.0.0.1 on an ephemeral port, prints the port on the first
line of stdout, serves until killed. Standard library only.

Token services (each CHECKS the request, and answers like Google's):
  POST /token   grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer:
                the assertion's header must be RS256/JWT (kid = the key id
                in STATE_DIR/sa.json if any), its claims iss = sa.json's
                client_email, scope = devstorage.read_write, aud = this
                URL, exp = iat + 3600, iat within 5 min of now; the RS256
                signature is VERIFIED with `openssl dgst -sha256 -verify
                STATE_DIR/pub.pem`. Else 400 invalid_grant.
                grant_type=refresh_token: client_id, client_secret and
                refresh_token must equal those of STATE_DIR/user.json.
  GET  /computeMetadata/v1/instance/service-accounts/default/token
                needs "Metadata-Flavor: Google" (else 403) and no
                X-Forwarded-For; answers with Metadata-Flavor: Google.
  Tokens are "ya29.<kind>-<n>-<random>", expires_in from the fault
  expires_in (default 3599). STATE_DIR/issued lists them, one a line.

A bucket (in memory), when the fault auth=1, only for a Bearer token this
server issued and has not revoked (else 401); deny=1 answers 403:
  GET  /storage/v1/b/B/o/NAME            metadata ("size" as a string)
  GET  /storage/v1/b/B/o/NAME?alt=media  bytes; Range bytes=S- and S-E
       (206 with exactly that part; a range of the whole object is a 200)
  GET  /storage/v1/b/B/o                 listing
  POST /upload/storage/v1/b/B/o?uploadType=media&name=N[&ifGenerationMatch=0]
  POST /upload/storage/v1/b/B/o?uploadType=resumable&name=N  (Location)
  PUT  /upload/storage/v1/b/B/o?upload_id=ID  Content-Range chunks: 308 with
       Range: bytes=0-N while incomplete, 200 with the metadata at the end;
       "bytes */T" asks for the status. Non-final chunks must be multiples
       of 256 KiB and start where the server is (else 400 / 503).

Control: POST /_fault with "name=value" lines (value "" clears); GET /_log
(one line a request: "METHOD PATH RANGE STATUS AUTH", then TOKEN and CHUNK
lines); POST /_reset forgets objects, faults, log and tokens.
Faults: auth, deny, revoke (drop every issued token), expires_in,
reject_tokens (401 for any token), token_500 (N answers 500), meta_503
(N), meta_404 (N metadata GETs miss, as if a racer had not finished
yet), media_cut (N GETs cut at half),
ignore_range (answer ranges with the whole object, as the emulator does
past the end), keep_short (a chunk PUT keeps only its first 256 KiB),
put_503 (N chunk PUTs fail before keeping anything), session_gone (N
chunk PUTs answer 404), finalize_early (the first chunk PUT finishes the
object, as the emulator does).
"""
import base64
import json
import os
import secrets
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

STATE = None
PORT = 0
LOCK = threading.RLock()
LOG = []
FAULTS = {}
OBJECTS = {}      # (bucket, name) -> bytes
SESSIONS = {}     # id -> dict(bucket, name, total, data, done)
ISSUED = []
COUNTER = [0]
UNIT = 256 * 1024
JWT_GRANT = "urn:ietf:params:oauth:grant-type:jwt-bearer"
SCOPE = "https://www.googleapis.com/auth/devstorage.read_write"


def note(line):
    with LOCK:
        LOG.append(line)


def fault(name, default=""):
    with LOCK:
        return FAULTS.get(name, default)


def take_fault(name):
    """Counts down a numeric fault; True when it fires."""
    with LOCK:
        v = FAULTS.get(name, "")
        if not v or v == "0":
            return False
        if v != "always":
            FAULTS[name] = str(int(v) - 1)
        return True


def b64url_decode(s):
    return base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))


def issue(kind):
    with LOCK:
        COUNTER[0] += 1
        tok = "ya29.%s-%d-%s" % (kind, COUNTER[0], secrets.token_hex(12))
        ISSUED.append(tok)
        with open(os.path.join(STATE, "issued"), "a") as f:
            f.write(tok + "\n")
    life = int(fault("expires_in", "3599") or "3599")
    return {"access_token": tok, "expires_in": life, "token_type": "Bearer"}


def load(name):
    try:
        with open(os.path.join(STATE, name)) as f:
            return json.load(f)
    except OSError:
        return {}


def verify_rs256(signing_input, sig):
    """True when `openssl dgst -sha256 -verify pub.pem` accepts the signature."""
    with tempfile.TemporaryDirectory(dir=STATE) as d:
        data, sigf = os.path.join(d, "data"), os.path.join(d, "sig")
        with open(data, "wb") as f:
            f.write(signing_input)
        with open(sigf, "wb") as f:
            f.write(sig)
        r = subprocess.run(["openssl", "dgst", "-sha256", "-verify",
                            os.path.join(STATE, "pub.pem"), "-signature", sigf, data],
                           capture_output=True)
        return r.returncode == 0 and b"Verified OK" in r.stdout


def check_jwt(assertion):
    """'' when the assertion is right, else what is wrong."""
    parts = assertion.split(".")
    if len(parts) != 3:
        return "not three parts"
    try:
        header = json.loads(b64url_decode(parts[0]))
        claims = json.loads(b64url_decode(parts[1]))
        sig = b64url_decode(parts[2])
    except ValueError:
        return "undecodable"
    sa = load("sa.json")
    now = time.time()
    if header.get("alg") != "RS256" or header.get("typ") != "JWT":
        return "header %r" % header
    if sa.get("private_key_id") and header.get("kid") != sa["private_key_id"]:
        return "kid %r" % header.get("kid")
    if claims.get("iss") != sa.get("client_email"):
        return "iss %r" % claims.get("iss")
    if claims.get("scope") != SCOPE:
        return "scope %r" % claims.get("scope")
    if claims.get("aud") != "http://127.0.0.1:%d/token" % PORT:
        return "aud %r" % claims.get("aud")
    iat, exp = claims.get("iat"), claims.get("exp")
    if not isinstance(iat, int) or not isinstance(exp, int) or exp - iat != 3600:
        return "iat/exp %r %r" % (iat, exp)
    if abs(iat - now) > 300:
        return "iat %d is not now" % iat
    if not verify_rs256((parts[0] + "." + parts[1]).encode(), sig):
        return "bad signature"
    return ""


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    # ---- plumbing ----

    def body(self):
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n else b""

    def send(self, status, data=b"", headers=(), ctype="application/json"):
        if isinstance(data, (dict, list)):
            data = json.dumps(data).encode()
        self.record(status)
        self.send_response(status)
        for k, v in headers:
            self.send_header(k, v)
        if data or status not in (204, 308):
            self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)
        return status

    def error(self, status, message):
        return self.send(status, {"error": {"code": status, "message": message}})

    def record(self, status):
        """Logs this request once, before its answer leaves."""
        if getattr(self, "auth", None) is None or self.recorded:
            return
        self.recorded = True
        note("%s %s %s %d %s" % (self.command, self.path,
                                 self.headers.get("Range") or self.headers.get("Content-Range") or "-",
                                 status, self.auth))

    # ---- dispatch ----

    def do_GET(self):
        self.route()

    def do_POST(self):
        self.route()

    def do_PUT(self):
        self.route()

    def route(self):
        self.auth, self.recorded = None, False
        url = urllib.parse.urlsplit(self.path)
        q = dict(urllib.parse.parse_qsl(url.query, keep_blank_values=True))
        path = url.path
        if path == "/_log":
            with LOCK:
                text = "\n".join(LOG) + "\n"
            self.send(200, text.encode(), ctype="text/plain")
            return
        if path == "/_fault":
            for line in self.body().decode().splitlines():
                k, _, v = line.partition("=")
                with LOCK:
                    FAULTS[k.strip()] = v.strip()
            self.send(204)
            return
        if path == "/_reset":
            self.body()
            with LOCK:
                LOG.clear()
                FAULTS.clear()
                OBJECTS.clear()
                SESSIONS.clear()
                ISSUED.clear()
            self.send(204)
            return
        self.auth = "bearer" if (self.headers.get("Authorization") or "").startswith("Bearer ") else "none"
        if path == "/token" and self.command == "POST":
            self.auth = "-"
            self.token()
            return
        if path == "/computeMetadata/v1/instance/service-accounts/default/token":
            self.auth = "-"
            self.metadata()
            return
        if path.startswith("/storage/v1/b/") or path.startswith("/upload/storage/v1/b/"):
            self.bucket(path, q)
            return
        self.body()
        self.error(404, "no route")

    # ---- token services ----

    def token(self):
        form = dict(urllib.parse.parse_qsl(self.body().decode()))
        if self.headers.get("Content-Type") != "application/x-www-form-urlencoded":
            note("TOKEN bad content type")
            return self.send(400, {"error": "invalid_request"})
        if take_fault("token_500"):
            return self.send(500, {"error": "internal_failure"})
        grant = form.get("grant_type")
        if grant == JWT_GRANT:
            why = check_jwt(form.get("assertion", ""))
            note("TOKEN jwt %s" % (why or "ok"))
            if why:
                return self.send(400, {"error": "invalid_grant",
                                       "error_description": "Invalid JWT Signature." if why == "bad signature" else why})
            return self.send(200, issue("sa"))
        if grant == "refresh_token":
            user = load("user.json")
            ok = all(form.get(k) == user.get(k) and user.get(k)
                     for k in ("client_id", "client_secret", "refresh_token"))
            note("TOKEN refresh %s" % ("ok" if ok else "bad"))
            if not ok:
                return self.send(400, {"error": "invalid_grant", "error_description": "Bad Request"})
            return self.send(200, issue("user"))
        note("TOKEN grant %r" % grant)
        return self.send(400, {"error": "unsupported_grant_type"})

    def metadata(self):
        self.body()
        if self.headers.get("Metadata-Flavor") != "Google" or self.headers.get("X-Forwarded-For"):
            note("TOKEN gce missing Metadata-Flavor")
            return self.send(403, b"Missing Metadata-Flavor:Google header.", ctype="text/html")
        if take_fault("token_500"):
            return self.send(500, b"oops", ctype="text/plain")
        note("TOKEN gce ok")
        return self.send(200, issue("gce"), headers=[("Metadata-Flavor", "Google")])

    # ---- the bucket ----

    def authorized(self):
        """'' when allowed, else the status to answer."""
        if fault("deny") == "1":
            return 403
        if fault("auth") != "1":
            return 0
        h = self.headers.get("Authorization") or ""
        if fault("reject_tokens") == "1":
            return 401
        if fault("revoke") == "1":
            with LOCK:
                ISSUED.clear()
                FAULTS["revoke"] = ""
        with LOCK:
            ok = h.startswith("Bearer ") and h[7:] in ISSUED
        return 0 if ok else 401

    def bucket(self, path, q):
        data = self.body()
        session = q.get("upload_id")
        # The session URI is the capability: GCS takes no token with it.
        denied = 0 if session else self.authorized()
        if denied:
            self.error(denied, "Anonymous caller does not have storage.objects.get access"
                       if denied == 401 else "caller does not have storage.objects.create access")
            return
        parts = path.split("/")
        upload = parts[1] == "upload"
        if upload:
            parts = parts[1:]
        # ['', 'storage', 'v1', 'b', B, 'o', NAME...]
        bucket = urllib.parse.unquote(parts[4])
        name = urllib.parse.unquote("/".join(parts[6:])) if len(parts) > 6 else None
        if self.command == "GET" and name is None:
            self.listing(bucket, q)
        elif self.command == "GET":
            self.get_object(bucket, name, q)
        elif self.command == "POST" and upload:
            self.start_upload(bucket, q, data)
        elif self.command == "PUT" and session:
            self.put_chunk(session, data)
        else:
            self.error(400, "bad request")

    def meta(self, bucket, name):
        data = OBJECTS[(bucket, name)]
        return {"kind": "storage#object", "bucket": bucket, "name": name,
                "size": str(len(data)), "generation": "1"}

    def listing(self, bucket, q):
        prefix = q.get("prefix", "")
        with LOCK:
            items = [self.meta(b, n) for (b, n) in sorted(OBJECTS) if b == bucket and n.startswith(prefix)]
        return self.send(200, {"kind": "storage#objects", "items": items})

    def get_object(self, bucket, name, q):
        with LOCK:
            data = OBJECTS.get((bucket, name))
        if data is None:
            return self.error(404, "No such object: %s/%s" % (bucket, name))
        if q.get("alt") != "media":
            if take_fault("meta_404"):
                return self.error(404, "No such object: %s/%s" % (bucket, name))
            if take_fault("meta_503"):
                return self.error(503, "backend error")
            with LOCK:
                return self.send(200, self.meta(bucket, name))
        rng = self.headers.get("Range")
        start, end, ranged = 0, len(data) - 1, False
        if rng and fault("ignore_range") != "1":
            a, _, b = rng[len("bytes="):].partition("-")
            start = int(a)
            end = min(int(b), len(data) - 1) if b else len(data) - 1
            ranged = start > 0 or end < len(data) - 1
            if start >= len(data):
                return self.send(416, b"", headers=[("Content-Range", "bytes */%d" % len(data))])
        part = data[start:end + 1]
        cut = take_fault("media_cut")
        self.record(299 if cut else 206 if ranged else 200)
        self.send_response(206 if ranged else 200)
        self.send_header("Content-Type", "application/x-tar")
        self.send_header("Content-Length", str(len(part)))
        if ranged:
            self.send_header("Content-Range", "bytes %d-%d/%d" % (start, end, len(data)))
        self.end_headers()
        if cut:
            self.wfile.write(part[: len(part) // 2])
            self.wfile.flush()
            self.close_connection = True
            self.connection.shutdown(2)
            return 299
        self.wfile.write(part)
        return 206 if start else 200

    def start_upload(self, bucket, q, data):
        name = q.get("name")
        if not name:
            return self.error(400, "no name")
        exists = (bucket, name) in OBJECTS
        if q.get("ifGenerationMatch") == "0" and exists:
            return self.error(412, "At least one of the pre-conditions you specified did not hold.")
        if q.get("uploadType") == "media":
            with LOCK:
                OBJECTS[(bucket, name)] = data
                return self.send(200, self.meta(bucket, name))
        if q.get("uploadType") != "resumable":
            return self.error(400, "uploadType")
        total = self.headers.get("X-Upload-Content-Length")
        if total is None or json.loads(data or b"{}") != {}:
            return self.error(400, "no X-Upload-Content-Length")
        sid = secrets.token_hex(16)
        with LOCK:
            SESSIONS[sid] = {"bucket": bucket, "name": name, "total": int(total), "data": b""}
        loc = "http://127.0.0.1:%d/upload/storage/v1/b/%s/o?uploadType=resumable&name=%s&upload_id=%s" % (
            PORT, urllib.parse.quote(bucket, safe=""), urllib.parse.quote(name, safe=""), sid)
        return self.send(200, b"", headers=[("Location", loc)])

    def put_chunk(self, sid, data):
        with LOCK:
            s = SESSIONS.get(sid)
        if s is None or take_fault("session_gone"):
            return self.error(404, "No such upload session")
        cr = self.headers.get("Content-Range", "")
        spec = cr[len("bytes "):] if cr.startswith("bytes ") else ""
        rng, _, total = spec.partition("/")
        if total != str(s["total"]):
            return self.error(400, "Content-Range total")
        have = len(s["data"])
        if s.get("done"):
            note("CHUNK after the end")
            return self.progress(s, sid, True)
        if rng == "*":
            note("CHUNK status %d" % have)
            return self.progress(s, sid)
        if take_fault("put_503"):
            return self.error(503, "backend error")
        start, end = (int(x) for x in rng.split("-"))
        if start != have or end - start + 1 != len(data):
            note("CHUNK bad range %s holding %d" % (rng, have))
            return self.error(503, "chunk does not start where the upload is")
        final = end + 1 == s["total"]
        if not final and len(data) % UNIT:
            return self.error(400, "a chunk must be a multiple of 256 KiB")
        if fault("finalize_early") == "1":
            final = True
        elif not final and fault("keep_short") == "1" and len(data) > UNIT:
            data = data[:UNIT]
        with LOCK:
            s["data"] += data
        note("CHUNK %d-%d kept %d" % (start, end, len(data)))
        return self.progress(s, sid, final)

    def progress(self, s, sid, final=False):
        if final or len(s["data"]) == s["total"]:
            with LOCK:
                OBJECTS[(s["bucket"], s["name"])] = s["data"]
                s["done"] = True
                return self.send(200, self.meta(s["bucket"], s["name"]))
        headers = [("Range", "bytes=0-%d" % (len(s["data"]) - 1))] if s["data"] else []
        return self.send(308, b"", headers=headers)


class Server(ThreadingHTTPServer):
    daemon_threads = True


def main():
    global STATE, PORT
    STATE = sys.argv[1]
    srv = Server(("127.0.0.1", 0), Handler)
    PORT = srv.server_address[1]
    print(PORT, flush=True)
    srv.serve_forever()


if __name__ == "__main__":
    main()
