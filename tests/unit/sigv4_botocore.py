#!/usr/bin/python3
"""Signs requests with botocore, the reference the AWS SDK for Python uses,
for tests/unit/test_sigv4.c.

Usage: /usr/bin/python3 sigv4_botocore.py < CASES
(Debian's python3-botocore imports only under /usr/bin/python3.)

Each input line is one request, tab-separated fields, every string
hex-encoded (UTF-8 bytes) so that no byte needs quoting:
  ACCESS SECRET TOKEN REGION SERVICE EPOCH METHOD HOST PATH PARAMS HEADERS PAYLOAD
  PATH     the raw path (not encoded), as given to dv_sigv4_sign
  PARAMS   "" or NAME:VALUE items joined by ','; VALUE "-" for none
  HEADERS  "" or "Name: value" lines joined by ','
  PAYLOAD  "empty", "unsigned", or "body:" + the hex of the body
  TOKEN    "-" for none
For each line, one line out: "Authorization: ..." TAB the canonical
request (hex). A line "ERROR ..." and exit status 2 when botocore is
missing.

The request is built as botocore's S3 client builds it: the key goes into
the URL percent-encoded with '/' and '~' kept (botocore.utils.
percent_encode), the query parameters as AWSRequest.params, and it is
signed by S3SigV4Auth, which, unlike SigV4Auth, signs the path as it
stands in the URL (no normalization of "//", "." or ".."), and sends
x-amz-content-sha256. UNSIGNED-PAYLOAD is chosen as botocore chooses it:
over https, with payload signing turned off in the S3 config.
"""
import datetime
import sys
import types
from unittest import mock

try:
    from botocore.auth import S3SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials
    from botocore.utils import percent_encode
except ImportError as e:  # pragma: no cover - the test reports it
    print("ERROR botocore is not importable (%s): apt-get install python3-botocore" % e)
    sys.exit(2)


def unhex(s):
    return bytes.fromhex(s).decode("utf-8")


def items(field):
    return [x for x in field.split(",") if x] if field else []


def sign(fields):
    (ak, sk, token, region, service, epoch, method, host, path, params,
     headers, payload) = fields
    creds = Credentials(unhex(ak), unhex(sk), None if token == "-" else unhex(token))
    url = "https://%s%s" % (unhex(host), percent_encode(unhex(path), safe="/~"))
    plist = []
    for item in items(params):
        name, _, value = item.partition(":")
        plist.append((unhex(name), "" if value == "-" else unhex(value)))
    body = None
    if payload.startswith("body:"):
        body = bytes.fromhex(payload[5:])
    req = AWSRequest(method=unhex(method), url=url, data=body, params=plist)
    # Set one by one: HTTPHeaders keeps a repeated name twice.
    req.headers["Host"] = unhex(host)
    for line in items(headers):
        name, _, value = unhex(line).partition(":")
        req.headers[name] = value.lstrip(" ")
    if payload == "unsigned":
        req.context["client_config"] = types.SimpleNamespace(
            s3={"payload_signing_enabled": False})
    auth = S3SigV4Auth(creds, unhex(service), unhex(region))
    seen = []
    inner = auth.canonical_request

    def canonical_request(r):
        seen.append(inner(r))
        return seen[-1]

    auth.canonical_request = canonical_request
    when = datetime.datetime.utcfromtimestamp(int(epoch))
    with mock.patch("botocore.auth.datetime") as dt:
        dt.datetime.utcnow.return_value = when
        auth.add_auth(req)
    return "Authorization: %s\t%s" % (req.headers["Authorization"],
                                      seen[0].encode("utf-8").hex())


def main():
    for line in sys.stdin:
        line = line.rstrip("\n")
        if line:
            print(sign(line.split("\t")))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
