#!/usr/bin/env python3
"""A small S3 for the unit tests of tiers/s3*.c, on 127.0.0.1.

Usage: s3_fixture.py BUCKET ACCESS_KEY SECRET [SESSION_TOKEN]
Prints the port on the first line of stdout; serves until its stdin
closes or it is killed.

Path-style objects /BUCKET/KEY in memory: HEAD, GET (Range bytes=S-[E],
If-None-Match), PUT, DELETE, and multipart (POST ?uploads, PUT
?partNumber&uploadId, POST ?uploadId, DELETE ?uploadId). EVERY request
is checked as S3 would: the SigV4 Authorization header (header auth,
canonical query sorted and re-encoded from the decoded parameters,
region-independent), x-amz-date, x-amz-content-sha256 present and equal
to the body's SHA-256 unless UNSIGNED-PAYLOAD, and x-amz-security-token
when a session token is given. A bad signature is 403
SignatureDoesNotMatch; a wrong access key 403 InvalidAccessKeyId.

Control (unsigned): GET /_log (one line per request: "METHOD PATH?QUERY
STATUS"), GET /_fault?mode=M (sets the fault mode), PUT /_put/KEY (stores
an object directly), GET /_objects ("KEY SIZE" lines), GET /_uploads
(multipart uploads still open).
Fault modes: none; cut-get (the first GET of each key sends half its
body and closes); fail-part-2 (part 2 always answers 500); forbid (403
AccessDenied to everything); slow-put (PUTs wait 2 s); complete-error
(CompleteMultipartUpload answers 200 with an <Error>); expired-once (the
first request answers 400 ExpiredToken); redirect (GET /_fault?mode=
redirect&to=PORT: every signed request answers 307 to the same path on
127.0.0.1:PORT).
"""
import hashlib
import hmac
import os
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

BUCKET, AK, SK = sys.argv[1:4]
TOKEN = sys.argv[4] if len(sys.argv) > 4 else None
LOCK = threading.Lock()
OBJECTS = {}
UPLOADS = {}
LOG = []
FAULT = ["none"]
REDIRECT_TO = [None]
GOT = set()
NEXT_ID = [0]


def enc(s):
    return urllib.parse.quote(s, safe="-_.~")


def hm(k, m):
    return hmac.new(k, m.encode(), hashlib.sha256).digest()


def etag(data):
    return '"%s"' % hashlib.md5(data).hexdigest()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def note(self, status):
        if self.path.startswith("/_"):
            return  # control requests are not part of the log
        with LOCK:
            LOG.append("%s %s %d" % (self.command, self.path, status))

    def send(self, status, body=b"", headers=(), ctype="application/xml"):
        if isinstance(body, str):
            body = body.encode()
        self.send_response(status)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Type", ctype)
        if not any(k == "Content-Length" for k, _ in headers):
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        # Logged before the body goes out: a client that has the answer
        # must find its line in /_log (it raced the log under load).
        self.note(status)
        if self.command != "HEAD":
            self.wfile.write(body)

    def error(self, status, code):
        self.send(status, "<?xml version=\"1.0\"?><Error><Code>%s</Code><Message>m</Message>"
                  "<CanonicalRequest>echoed</CanonicalRequest></Error>" % code)

    # ---- auth ----

    def check_auth(self, body):
        auth = self.headers.get("Authorization", "")
        if not auth.startswith("AWS4-HMAC-SHA256 "):
            return "AccessDenied"
        parts = dict(p.strip().split("=", 1) for p in auth[17:].split(","))
        cred = parts["Credential"].split("/")
        if cred[0] != AK:
            return "InvalidAccessKeyId"
        if TOKEN is not None and self.headers.get("x-amz-security-token") != TOKEN:
            return "InvalidToken"
        payload = self.headers.get("x-amz-content-sha256")
        if not payload:
            return "InvalidRequest"
        if payload != "UNSIGNED-PAYLOAD" and payload != hashlib.sha256(body).hexdigest():
            return "XAmzContentSHA256Mismatch"
        signed = parts["SignedHeaders"].split(";")
        for must in ("host", "x-amz-date", "x-amz-content-sha256"):
            if must not in signed:
                return "AccessDenied"
        if TOKEN is not None and "x-amz-security-token" not in signed:
            return "AccessDenied"
        path, _, query = self.path.partition("?")
        qs = urllib.parse.parse_qsl(query, keep_blank_values=True)
        cq = "&".join("%s=%s" % kv for kv in sorted((enc(k), enc(v)) for k, v in qs))
        ch = "".join("%s:%s\n" % (k, " ".join(self.headers.get(k, "").split())) for k in signed)
        creq = "\n".join([self.command, path, cq, ch, ";".join(signed), payload])
        sts = "\n".join(["AWS4-HMAC-SHA256", self.headers.get("x-amz-date", ""), "/".join(cred[1:]),
                         hashlib.sha256(creq.encode()).hexdigest()])
        k = hm(("AWS4" + SK).encode(), cred[1])
        for x in cred[2:]:
            k = hmac.new(k, x.encode(), hashlib.sha256).digest()
        sig = hmac.new(k, sts.encode(), hashlib.sha256).hexdigest()
        if sig != parts["Signature"]:
            if os.environ.get("DV_TEST_VERBOSE"):
                sys.stderr.write("signature mismatch; canonical request:\n%s\n" % creq)
            return "SignatureDoesNotMatch"
        return None

    # ---- dispatch ----

    def read_body(self):
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n else b""

    def handle_any(self):
        body = self.read_body()
        path, _, query = self.path.partition("?")
        q = dict(urllib.parse.parse_qsl(query, keep_blank_values=True))
        if path.startswith("/_"):
            return self.control(path, q, body)
        denied = self.check_auth(body)
        if denied:
            return self.error(400 if denied in ("XAmzContentSHA256Mismatch", "InvalidRequest") else 403, denied)
        if FAULT[0] == "forbid":
            return self.error(403, "AccessDenied")
        if FAULT[0] == "redirect":
            return self.send(307, headers=[("Location", "http://127.0.0.1:%s%s"
                                            % (REDIRECT_TO[0], self.path))])
        if FAULT[0] == "expired-once":
            FAULT[0] = "none"
            return self.error(400, "ExpiredToken")
        parts = path.lstrip("/").split("/", 1)
        if parts[0] != BUCKET:
            return self.error(404, "NoSuchBucket")
        key = urllib.parse.unquote(parts[1]) if len(parts) > 1 else ""
        if self.command == "POST" and "uploads" in q:
            return self.create(key)
        if "uploadId" in q:
            return self.multipart(key, q, body)
        if self.command == "PUT":
            if FAULT[0] == "slow-put":
                time.sleep(2)
            with LOCK:
                OBJECTS[key] = body
            return self.send(200, headers=[("ETag", etag(body))])
        if self.command == "DELETE":
            with LOCK:
                OBJECTS.pop(key, None)
            return self.send(204)
        return self.get(key)

    do_GET = do_HEAD = do_PUT = do_POST = do_DELETE = handle_any

    def control(self, path, q, body):
        if path == "/_log":
            with LOCK:
                text = "".join(l + "\n" for l in LOG)
            return self.send(200, text, ctype="text/plain")
        if path == "/_fault":
            FAULT[0] = q.get("mode", "none")
            REDIRECT_TO[0] = q.get("to")
            return self.send(200, "ok\n", ctype="text/plain")
        if path.startswith("/_put/"):
            with LOCK:
                OBJECTS[urllib.parse.unquote(path[6:])] = body
            return self.send(200, "ok\n", ctype="text/plain")
        if path == "/_objects":
            with LOCK:
                text = "".join("%s %d\n" % (k, len(v)) for k, v in sorted(OBJECTS.items()))
            return self.send(200, text, ctype="text/plain")
        if path == "/_uploads":
            with LOCK:
                text = "".join("%s\n" % u for u in sorted(UPLOADS))
            return self.send(200, text, ctype="text/plain")
        return self.send(404, "", ctype="text/plain")

    def get(self, key):
        with LOCK:
            data = OBJECTS.get(key)
        if data is None:
            return self.error(404, "NoSuchKey")
        tag = etag(data)
        if self.headers.get("If-None-Match") == tag:
            self.send_response(304)
            self.send_header("ETag", tag)
            self.end_headers()
            return self.note(304)
        rng = self.headers.get("Range")
        status, start, end = 200, 0, len(data) - 1
        if rng and rng.startswith("bytes="):
            a, _, b = rng[6:].partition("-")
            start = int(a)
            end = int(b) if b else len(data) - 1
            if start >= len(data):
                return self.error(416, "InvalidRange")
            status = 206
        part = data[start:end + 1]
        headers = [("ETag", tag), ("Content-Length", str(len(part))), ("Accept-Ranges", "bytes")]
        if status == 206:
            headers.append(("Content-Range", "bytes %d-%d/%d" % (start, end, len(data))))
        cut = False
        if self.command == "GET" and FAULT[0] == "cut-get":
            with LOCK:
                cut = key not in GOT
                GOT.add(key)
        if not cut:
            return self.send(status, part, headers, ctype="application/octet-stream")
        self.send_response(status)
        for k, v in headers:
            self.send_header(k, v)
        self.end_headers()
        self.note(status)
        self.wfile.write(part[: len(part) // 2])
        self.wfile.flush()
        self.close_connection = True
        self.connection.shutdown(2)

    def create(self, key):
        with LOCK:
            NEXT_ID[0] += 1
            uid = "upload/%d+x=" % NEXT_ID[0]  # needs encoding in queries
            UPLOADS[uid] = {"key": key, "parts": {}}
        self.send(200, "<InitiateMultipartUploadResult><Bucket>%s</Bucket><Key>%s</Key>"
                  "<UploadId>%s</UploadId></InitiateMultipartUploadResult>" % (BUCKET, key, uid))

    def multipart(self, key, q, body):
        uid = q["uploadId"]
        with LOCK:
            up = UPLOADS.get(uid)
        if up is None or up["key"] != key:
            return self.error(404, "NoSuchUpload")
        if self.command == "PUT":
            n = int(q["partNumber"])
            if FAULT[0] == "fail-part-2" and n == 2:
                return self.error(500, "InternalError")
            with LOCK:
                up["parts"][n] = body
            return self.send(200, headers=[("ETag", etag(body))])
        if self.command == "DELETE":
            with LOCK:
                UPLOADS.pop(uid, None)
            return self.send(204)
        # complete
        if FAULT[0] == "complete-error":
            return self.send(200, "<Error><Code>InternalError</Code></Error>")
        text = body.decode()
        nums = [int(x.split("</PartNumber>")[0]) for x in text.split("<PartNumber>")[1:]]
        tags = [x.split("</ETag>")[0] for x in text.split("<ETag>")[1:]]
        with LOCK:
            ok = nums == sorted(up["parts"]) and nums == list(range(1, len(nums) + 1)) and \
                all(etag(up["parts"][n]) == t for n, t in zip(nums, tags))
            if ok:
                OBJECTS[key] = b"".join(up["parts"][n] for n in nums)
                UPLOADS.pop(uid, None)
        if not ok:
            return self.error(400, "InvalidPart")
        self.send(200, "<CompleteMultipartUploadResult><ETag>\"x-%d\"</ETag>"
                  "</CompleteMultipartUploadResult>" % len(nums))


def watch_stdin():
    while sys.stdin.buffer.read(1):
        pass
    os._exit(0)


class Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        if not isinstance(sys.exc_info()[1], (ConnectionError, OSError)):
            super().handle_error(request, client_address)


def main():
    srv = Server(("127.0.0.1", 0), Handler)
    threading.Thread(target=watch_stdin, daemon=True).start()
    sys.stdout.write("%d\n" % srv.server_address[1])
    sys.stdout.flush()
    srv.serve_forever()


if __name__ == "__main__":
    main()
