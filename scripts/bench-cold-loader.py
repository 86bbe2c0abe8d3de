#!/usr/bin/python3
"""Epochs of a PyTorch DataLoader over the tar shards of one directory.

usage: bench-cold-loader.py DIR EPOCHS [WORKERS]
A torch IterableDataset reads every member of its shards with tarfile;
each DataLoader worker takes its own shards (worker k: shards k, k+W, ...),
so the first epoch on a fresh mount has W cold shards filling at a time.
Prints one line per epoch: "epoch N BYTES SECONDS SAMPLES".
Debian's python3-torch imports only under /usr/bin/python3.
"""
import os
import sys
import tarfile
import time
import warnings

import torch
from torch.utils.data import DataLoader, IterableDataset, get_worker_info


class TarShards(IterableDataset):
    def __init__(self, paths):
        self.paths = paths

    def __iter__(self):
        info = get_worker_info()
        mine = self.paths if info is None else self.paths[info.id::info.num_workers]
        for path in mine:
            # Stream mode ("r|"): one sequential pass, as webdataset reads.
            with tarfile.open(path, "r|") as tf:
                for m in tf:
                    if m.isfile():
                        data = tf.extractfile(m).read()
                        # The sample's size only: a tensor of the bytes would
                        # measure the workers' queue, not the read.
                        yield len(data)


def main():
    root, epochs = sys.argv[1], int(sys.argv[2])
    workers = int(sys.argv[3]) if len(sys.argv) > 3 else 4
    paths = sorted(os.path.join(root, n) for n in os.listdir(root) if n.endswith(".tar"))
    loader = DataLoader(TarShards(paths), batch_size=256, num_workers=workers)
    for e in range(1, epochs + 1):
        t0 = time.monotonic()
        total = samples = 0
        for batch in loader:
            total += int(batch.sum())
            samples += len(batch)
        print("epoch %d %d %.3f %d" % (e, total, time.monotonic() - t0, samples), flush=True)


if __name__ == "__main__":
    # Four workers on a two-core machine is the point, not a mistake.
    warnings.filterwarnings("ignore", message="This DataLoader will create")
    torch.set_num_threads(1)
    main()
