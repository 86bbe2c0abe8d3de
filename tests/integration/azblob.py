#!/usr/bin/env python3
"""A small Azure Blob client for the integration tests (stdlib only).

Signs with Shared Key through azsign.py (the testkit's reference signer,
copied beside this file); AZ_ACCOUNT / AZ_KEY override the well-known
Azurite account. URLs are path-style: http://127.0.0.1:PORT/ACCOUNT/CONT.

  azblob.py mkcontainer CONTAINER_URL       create (409 "exists" is fine)
  azblob.py list CONTAINER_URL              blob names, one a line
  azblob.py blocks BLOB_URL                 committed blocks of a blob
  azblob.py sas PERMS CONTAINER_URL         a service SAS for the container
  azblob.py wait CONTAINER_URL N SECS       wait until >= N blobs; prints N
Exit status 0, or 1 with the HTTP status and body on stderr.
"""
import os
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
import xml.etree.ElementTree as ET

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import azsign  # noqa: E402

VERSION = "2021-08-06"


def request(method, url, query=""):
    u = urllib.parse.urlsplit(url)
    path = u.path + ("?" + query if query else "")
    headers = ["x-ms-version: " + VERSION,
               "x-ms-date: " + time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime())]
    if method == "PUT":
        # urllib would add a Content-Type of its own: name one, and sign it.
        headers += ["Content-Length: 0", "Content-Type: application/octet-stream"]
    auth = azsign.sharedkey(method, path, headers)
    req = urllib.request.Request("%s://%s%s" % (u.scheme, u.netloc, path), method=method)
    for h in headers:
        k, v = h.split(":", 1)
        req.add_header(k, v.strip())
    req.add_header("Authorization", auth)
    if method == "PUT":
        req.data = b""
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def die(status, body):
    sys.stderr.write("HTTP %d: %s\n" % (status, body[:300].decode("utf-8", "replace")))
    sys.exit(1)


def names(url):
    out, marker = [], ""
    while True:
        q = "comp=list&restype=container" + ("&marker=" + urllib.parse.quote(marker) if marker else "")
        st, body = request("GET", url, q)
        if st != 200:
            die(st, body)
        root = ET.fromstring(body)
        out += [b.findtext("Name") for b in root.iter("Blob")]
        marker = root.findtext("NextMarker") or ""
        if not marker:
            return out


def main():
    a = sys.argv[1:]
    if a[0] == "mkcontainer":
        st, body = request("PUT", a[1], "restype=container")
        if st not in (201, 409):
            die(st, body)
    elif a[0] == "list":
        for n in names(a[1]):
            print(n)
    elif a[0] == "blocks":
        st, body = request("GET", a[1], "blocklisttype=committed&comp=blocklist")
        if st != 200:
            die(st, body)
        print(len(list(ET.fromstring(body).iter("Block"))))
    elif a[0] == "sas":
        cont = urllib.parse.urlsplit(a[2]).path.rstrip("/").split("/")[-1]
        print(azsign.servicesas(a[1], cont))
    elif a[0] == "wait":
        deadline = time.time() + float(a[3])
        n = 0
        while True:
            n = len(names(a[1]))
            if n >= int(a[2]) or time.time() > deadline:
                break
            time.sleep(0.2)
        print(n)
        sys.exit(0 if n >= int(a[2]) else 1)
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
