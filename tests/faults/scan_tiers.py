#!/usr/bin/env python3
"""Checks every <hash>.tar in every tier directory against the origin.

usage: scan_tiers.py [--no-staging] ORIGIN_DIR TIER_DIR...

The origin's manifests (datasets.json, each <dataset>/manifest.json and
every revisions/<N>.json) give each content hash its size and sha256. Every
file named <hash>.tar in a tier must be a regular file of a known hash with
that size and that sha256: anything else is a wrong byte in a tier.
With --no-staging, a file left in .staging/ is a failure too (a quiet
daemon, or none, holds no staging file).

Prints one line per problem and a summary "scan: N objects ok in T tiers,
M bad, S staging"; exits 1 on any problem.
"""
import glob
import hashlib
import json
import os
import re
import sys

HASH_TAR = re.compile(r"^([0-9a-f]{32,64})\.tar$")


def known_shards(origin):
    shards = {}
    docs = glob.glob(os.path.join(origin, "**", "manifest.json"), recursive=True)
    docs += glob.glob(os.path.join(origin, "**", "revisions", "*.json"), recursive=True)
    for doc in docs:
        try:
            with open(doc) as f:
                m = json.load(f)
        except (OSError, ValueError):
            continue
        for s in m.get("shards", []):
            shards[s["content_hash"]] = (int(s["size"]), s["sha256"])
    return shards


def sha256_of(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while True:
            b = f.read(1 << 20)
            if not b:
                break
            h.update(b)
    return h.hexdigest()


def main(argv):
    no_staging = False
    if argv and argv[0] == "--no-staging":
        no_staging = True
        argv = argv[1:]
    if len(argv) < 2:
        sys.stderr.write(__doc__)
        return 2
    origin, tiers = argv[0], argv[1:]
    shards = known_shards(origin)
    ok = bad = staging = 0
    for tier in tiers:
        if not os.path.isdir(tier):
            continue  # a tier deleted by the test holds nothing wrong
        for name in sorted(os.listdir(tier)):
            m = HASH_TAR.match(name)
            if not m:
                continue
            path = os.path.join(tier, name)
            h = m.group(1)
            if os.path.islink(path) or not os.path.isfile(path):
                print("BAD %s: not a regular file" % path)
                bad += 1
                continue
            if h not in shards:
                print("BAD %s: no manifest has this content hash" % path)
                bad += 1
                continue
            size, sha = shards[h]
            try:
                got_size = os.path.getsize(path)
                got = sha256_of(path)
            except FileNotFoundError:
                continue  # evicted while we looked: nothing wrong with that
            if got_size != size or got != sha:
                print("BAD %s: %d bytes, sha256 %s; manifest: %d bytes, %s"
                      % (path, got_size, got, size, sha))
                bad += 1
                continue
            ok += 1
        st = os.path.join(tier, ".staging")
        if os.path.isdir(st):
            left = os.listdir(st)
            staging += len(left)
            if no_staging:
                for n in left:
                    print("BAD %s/%s: staging file left behind" % (st, n))
    print("scan: %d objects ok in %d tiers, %d bad, %d staging"
          % (ok, len(tiers), bad, staging))
    return 1 if bad or (no_staging and staging) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
