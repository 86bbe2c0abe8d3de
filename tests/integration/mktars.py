#!/usr/bin/env python3
"""Writes N tar shards of samples into OUTDIR, deterministically.

usage: mktars.py OUTDIR N [--kb KB] [--seed S] [--prefix shard-]
Each shard holds samples <id>.wav (random bytes) and <id>.json, about KB
kilobytes in all.
"""
import argparse
import io
import json
import os
import random
import tarfile


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("outdir")
    ap.add_argument("n", type=int)
    ap.add_argument("--kb", type=int, default=256)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--prefix", default="shard-")
    a = ap.parse_args()
    os.makedirs(a.outdir, exist_ok=True)
    rng = random.Random(a.seed)
    per = 64 * 1024
    for i in range(a.n):
        path = os.path.join(a.outdir, "%s%06d.tar" % (a.prefix, i))
        with tarfile.open(path, "w", format=tarfile.USTAR_FORMAT) as tf:
            left, k = a.kb * 1024, 0
            while left > 0:
                sid = "s%04d_%06d" % (i, k)
                size = min(per, left)
                blobs = [(sid + ".wav", rng.randbytes(size)),
                         (sid + ".json", json.dumps({"id": sid, "k": k}).encode())]
                for name, data in blobs:
                    ti = tarfile.TarInfo(name)
                    ti.size = len(data)
                    ti.mtime = 1700000000
                    tf.addfile(ti, io.BytesIO(data))
                left -= size
                k += 1


if __name__ == "__main__":
    main()
