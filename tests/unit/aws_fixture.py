#!/usr/bin/env python3
"""AWS token services for the credential-chain unit tests, on 127.0.0.1.

Usage: aws_fixture.py [--role ARN] [--token TOKEN] [--session NAME]
                      [--auth TOKEN] [--expires-in SECONDS] [--redirect URL]
Prints the port on the first line of stdout; serves until its stdin
closes (the test process died or finished) or it is killed.

Each service CHECKS the request as the real one would and refuses a
wrong one (the refusal is in the log):
  POST /          STS AssumeRoleWithWebIdentity: form body with
                  Action=AssumeRoleWithWebIdentity, Version=2011-06-15,
                  RoleArn == --role, WebIdentityToken == --token,
                  RoleSessionName present (== --session when given).
                  403 <ErrorResponse> with Code AccessDenied otherwise.
  GET /ecs/...    ECS container agent: Authorization == --auth (when
                  given), else 401. JSON credentials.
  PUT /latest/api/token                      IMDSv2 session token: needs
                  X-aws-ec2-metadata-token-ttl-seconds; else 400.
  GET /latest/meta-data/iam/security-credentials/[ROLE]   needs
                  X-aws-ec2-metadata-token equal to an issued token, else
                  401; lists "test-role", then its JSON credentials.
  GET /_log       the requests so far: "<service> <verdict>" per line,
                  and "request METHOD PATH" for every request, with
                  "secret-header NAME" when it carried Authorization or
                  X-aws-ec2-metadata-token.
With --redirect URL, STS, the ECS agent and the IMDS credential GETs
answer 307 Location: URL + the same path ("<service> redirected"); the
IMDS token PUT still answers, so that the GETs carry a session token.
Credentials handed out: access key ASIA<SERVICE>..., secret
<SERVICE>SECRET..., token <SERVICE>TOKEN..., expiring --expires-in
seconds after the request (default 3600).
"""
import argparse
import json
import os
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ARGS = None
LOCK = threading.Lock()
LOG = []
TOKENS = set()
COUNT = [0]


def note(line):
    with LOCK:
        LOG.append(line)


def creds(service):
    with LOCK:
        COUNT[0] += 1
        n = COUNT[0]
    exp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + ARGS.expires_in))
    return {
        "AccessKeyId": "ASIA%s%04d" % (service, n),
        "SecretAccessKey": "%sSECRET/%04d+key" % (service, n),
        "Token": "%sTOKEN%04d/+=tok" % (service, n),
        "Expiration": exp,
    }


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def reply(self, status, body, ctype="text/plain"):
        data = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def seen(self):
        note("request %s %s" % (self.command, self.path.split("?", 1)[0]))
        for name in ("Authorization", "X-aws-ec2-metadata-token"):
            if self.headers.get(name) is not None:
                note("secret-header %s" % name)

    def redirected(self, service):
        if not ARGS.redirect:
            return False
        note("%s redirected" % service)
        self.send_response(307)
        self.send_header("Location", ARGS.redirect.rstrip("/") + self.path)
        self.send_header("Content-Length", "0")
        self.end_headers()
        return True

    def body(self):
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n).decode() if n else ""

    def do_GET(self):
        path = self.path.split("?", 1)[0]
        if path == "/_log":
            with LOCK:
                return self.reply(200, "".join(l + "\n" for l in LOG))
        self.seen()
        if path.startswith("/ecs/"):
            return self.redirected("ecs") or self.ecs()
        if path.startswith("/latest/meta-data/iam/security-credentials/"):
            return self.redirected("imds") or self.imds_creds(path)
        note("unknown GET %s" % path)
        self.reply(404, "not found\n")

    def do_PUT(self):
        self.seen()
        self.body()
        if self.path == "/latest/api/token":
            ttl = self.headers.get("X-aws-ec2-metadata-token-ttl-seconds")
            if not ttl or not ttl.isdigit():
                note("imds-token refused: no ttl header")
                return self.reply(400, "missing ttl\n")
            with LOCK:
                tok = "IMDSSESSION%d" % (len(TOKENS) + 1)
                TOKENS.add(tok)
            note("imds-token ok")
            return self.reply(200, tok)
        self.reply(404, "not found\n")

    def do_POST(self):
        self.seen()
        text = self.body()
        if self.redirected("sts"):
            return
        form = dict(urllib.parse.parse_qsl(text, keep_blank_values=True))
        why = None
        if "application/x-www-form-urlencoded" not in (self.headers.get("Content-Type") or ""):
            why = "content-type"
        elif form.get("Action") != "AssumeRoleWithWebIdentity":
            why = "action"
        elif form.get("Version") != "2011-06-15":
            why = "version"
        elif form.get("RoleArn") != ARGS.role:
            why = "role"
        elif form.get("WebIdentityToken") != ARGS.token:
            why = "token"
        elif not form.get("RoleSessionName") or (ARGS.session and form["RoleSessionName"] != ARGS.session):
            why = "session"
        if why:
            note("sts refused: %s" % why)
            return self.reply(403, "<ErrorResponse><Error><Type>Sender</Type><Code>AccessDenied</Code>"
                              "<Message>Not authorized</Message></Error></ErrorResponse>", "text/xml")
        note("sts ok")
        c = creds("STS")
        xml = ("<AssumeRoleWithWebIdentityResponse><AssumeRoleWithWebIdentityResult>"
               "<Credentials><SessionToken>%s</SessionToken><SecretAccessKey>%s</SecretAccessKey>"
               "<Expiration>%s</Expiration><AccessKeyId>%s</AccessKeyId></Credentials>"
               "<SubjectFromWebIdentityToken>sub</SubjectFromWebIdentityToken>"
               "</AssumeRoleWithWebIdentityResult></AssumeRoleWithWebIdentityResponse>"
               % (c["Token"], c["SecretAccessKey"], c["Expiration"], c["AccessKeyId"]))
        self.reply(200, xml, "text/xml")

    def ecs(self):
        if ARGS.auth is not None and self.headers.get("Authorization") != ARGS.auth:
            note("ecs refused: authorization")
            return self.reply(401, json.dumps({"message": "unauthorized"}), "application/json")
        note("ecs ok")
        c = creds("ECS")
        c["RoleArn"] = "arn:aws:iam::123456789012:role/task"
        self.reply(200, json.dumps(c), "application/json")

    def imds_creds(self, path):
        tok = self.headers.get("X-aws-ec2-metadata-token")
        with LOCK:
            good = tok in TOKENS
        if not good:
            note("imds refused: token")
            return self.reply(401, "")
        role = path.rsplit("/", 1)[1]
        if role == "":
            note("imds-role ok")
            return self.reply(200, "test-role")
        if role != "test-role":
            note("imds refused: role %s" % role)
            return self.reply(404, "")
        note("imds-creds ok")
        c = creds("IMDS")
        c.update({"Code": "Success", "LastUpdated": "2024-01-01T00:00:00Z", "Type": "AWS-HMAC"})
        self.reply(200, json.dumps(c, indent=2), "application/json")


def watch_stdin():
    # The test holds our stdin open; when it goes away, so do we.
    while sys.stdin.buffer.read(1):
        pass
    os._exit(0)


def main():
    global ARGS
    ap = argparse.ArgumentParser()
    ap.add_argument("--role", default="arn:aws:iam::123456789012:role/datavo")
    ap.add_argument("--token", default="")
    ap.add_argument("--session", default="")
    ap.add_argument("--auth", default=None)
    ap.add_argument("--expires-in", type=int, default=3600)
    ap.add_argument("--redirect", default=None)
    ARGS = ap.parse_args()
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    srv.daemon_threads = True
    threading.Thread(target=watch_stdin, daemon=True).start()
    sys.stdout.write("%d\n" % srv.server_address[1])
    sys.stdout.flush()
    srv.serve_forever()


if __name__ == "__main__":
    main()
