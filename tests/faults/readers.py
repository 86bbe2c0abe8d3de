#!/usr/bin/env python3
"""Concurrent readers for the fault matrix and the soak: every byte checked.

usage: readers.py --origin DIR --dataset NAME --mounts M1[,M2…] --readers N
                  (--reads K | --duration SECS) [--mode full|random] [--seed S]
                  [--fault-log FILE] [--rss-pid PID[,PID…]] [--rss-every SECS]
                  [--json OUT]

Reader i uses mount i % len(mounts). Each iteration picks a shard at random
and opens it through the mount; "full" reads it whole and compares its
sha256 with the manifest; "random" reads 1-8 random ranges (pread) and
compares the sha256 of each with the same range of the origin's own file
(itself checked against the manifest first), and one time in four reads it
whole as well. Wrong bytes are counted, never tolerated.

An error (open or read) is "explained" when the fault origin's log
(--fault-log, see origin.py) shows a fault injected on that shard's hash
between the open (less 2 s) and the error (plus 1 s): the soak injects
faults, and only their errors are allowed. Exit status: 0 when no byte was
wrong and no error was unexplained; 1 otherwise. Prints a summary and, with
--json, writes it to a file; with --rss-pid, samples VmRSS every
--rss-every seconds.
"""
import argparse
import errno
import hashlib
import json
import multiprocessing as mp
import os
import random
import sys
import threading
import time


def load_manifest(origin, dataset):
    with open(os.path.join(origin, dataset, "manifest.json")) as f:
        m = json.load(f)
    return [(s["name"], s["content_hash"], int(s["size"]), s["sha256"])
            for s in m["shards"]]


def reader(idx, a, shards, q):
    rng = random.Random(a.seed * 1000 + idx)
    mounts = a.mounts.split(",")
    mnt = mounts[idx % len(mounts)]
    origin_files = {h: os.path.join(a.origin, "shards", h + ".tar") for _, h, _, _ in shards}
    st = {"reads": 0, "bytes": 0, "wrong": 0, "wrong_bytes": 0, "errors": []}
    end = time.time() + a.duration if a.duration else None
    n = 0
    while (end and time.time() < end) or (not end and n < a.reads):
        n += 1
        name, h, size, sha = rng.choice(shards)
        path = os.path.join(mnt, a.dataset, name)
        t0 = time.time()
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError as e:
            st["errors"].append((errno.errorcode.get(e.errno, str(e.errno)), "open", h, t0, time.time()))
            continue
        try:
            whole = a.mode == "full" or rng.random() < 0.25
            if a.mode == "random":
                with open(origin_files[h], "rb") as of:
                    for _ in range(rng.randint(1, 8)):
                        off = rng.randrange(0, size)
                        ln = rng.randint(1, min(size - off, 256 * 1024))
                        got = os.pread(fd, ln, off)
                        of.seek(off)
                        want = of.read(ln)
                        st["reads"] += 1
                        st["bytes"] += len(got)
                        if hashlib.sha256(got).digest() != hashlib.sha256(want).digest():
                            st["wrong"] += 1
                            st["wrong_bytes"] += sum(1 for x, y in zip(got, want) if x != y) + abs(len(got) - len(want))
            if whole:
                hh, off = hashlib.sha256(), 0
                while True:
                    b = os.pread(fd, 1 << 20, off)
                    if not b:
                        break
                    hh.update(b)
                    off += len(b)
                st["reads"] += 1
                st["bytes"] += off
                if off != size or hh.hexdigest() != sha:
                    st["wrong"] += 1
                    st["wrong_bytes"] += max(1, abs(size - off))
        except OSError as e:
            st["errors"].append((errno.errorcode.get(e.errno, str(e.errno)), "read", h, t0, time.time()))
        finally:
            os.close(fd)
    q.put(st)


def injections(path):
    inj = {}
    if not path or not os.path.exists(path):
        return inj
    with open(path) as f:
        for line in f:
            p = line.split()
            if len(p) < 7 or p[4] == "-" or "/shards/" not in p[2]:
                continue
            h = p[2].rsplit("/", 1)[1][:-4]
            inj.setdefault(h, []).append((float(p[0]), p[4]))
    return inj


def rss_kb(pid):
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--origin", required=True)
    ap.add_argument("--dataset", required=True)
    ap.add_argument("--mounts", required=True)
    ap.add_argument("--readers", type=int, default=4)
    ap.add_argument("--reads", type=int, default=10)
    ap.add_argument("--duration", type=float, default=0)
    ap.add_argument("--mode", choices=["full", "random"], default="full")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--fault-log")
    ap.add_argument("--rss-pid", default="")
    ap.add_argument("--rss-every", type=float, default=5)
    ap.add_argument("--json")
    a = ap.parse_args()

    shards = load_manifest(a.origin, a.dataset)
    for name, h, size, sha in shards:  # the ground truth is itself checked
        with open(os.path.join(a.origin, "shards", h + ".tar"), "rb") as f:
            if hashlib.sha256(f.read()).hexdigest() != sha:
                sys.exit("readers.py: origin file of %s does not match its manifest" % name)

    pids = [int(p) for p in a.rss_pid.split(",") if p]
    rss, stop = [], threading.Event()

    def sample():
        t0 = time.time()
        while True:
            rss.append([round(time.time() - t0, 1)] + [rss_kb(p) for p in pids])
            if stop.wait(a.rss_every):
                rss.append([round(time.time() - t0, 1)] + [rss_kb(p) for p in pids])
                return

    th = threading.Thread(target=sample, daemon=True) if pids else None
    if th:
        th.start()
    q = mp.Queue()
    procs = [mp.Process(target=reader, args=(i, a, shards, q)) for i in range(a.readers)]
    t_start = time.time()
    for p in procs:
        p.start()
    results = [q.get() for _ in procs]
    for p in procs:
        p.join()
    elapsed = time.time() - t_start
    stop.set()
    if th:
        th.join()

    inj = injections(a.fault_log)
    total = {"reads": 0, "bytes": 0, "wrong": 0, "wrong_bytes": 0}
    errors, unexplained = [], []
    for r in results:
        for k in total:
            total[k] += r[k]
        errors += r["errors"]
    by_errno = {}
    for e, where, h, t0, t1 in errors:
        by_errno[e] = by_errno.get(e, 0) + 1
        if not any(t0 - 2 <= t <= t1 + 1 for t, _ in inj.get(h, [])):
            unexplained.append({"errno": e, "where": where, "hash": h,
                                "t_open": round(t0 - t_start, 2), "t_err": round(t1 - t_start, 2)})
    nfaults = sum(len(v) for v in inj.values())
    kinds = {}
    for v in inj.values():
        for _, k in v:
            kinds[k] = kinds.get(k, 0) + 1
    summary = dict(total, seconds=round(elapsed, 1), readers=a.readers,
                   errors=len(errors), errors_by_errno=by_errno,
                   unexplained_errors=len(unexplained), unexplained=unexplained[:20],
                   faults_injected=nfaults, faults_by_kind=kinds, rss_kb=rss)
    print("readers: %d readers, %.0f s, %d reads, %.1f MiB, wrong reads %d (wrong bytes %d), "
          "errors %d %s (unexplained %d), faults injected %d %s"
          % (a.readers, elapsed, total["reads"], total["bytes"] / 2**20, total["wrong"],
             total["wrong_bytes"], len(errors), json.dumps(by_errno), len(unexplained),
             nfaults, json.dumps(kinds)))
    for u in unexplained[:10]:
        print("unexplained error: %s" % json.dumps(u))
    if rss:
        vals = [r[1] for r in rss if r[1]]
        if vals:
            print("rss (KiB) of pid %d: first %d, min %d, max %d, last %d over %d samples"
                  % (pids[0], vals[0], min(vals), max(vals), vals[-1], len(vals)))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(summary, f, indent=1)
    return 0 if total["wrong"] == 0 and not unexplained else 1


if __name__ == "__main__":
    sys.exit(main())
