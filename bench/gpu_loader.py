"""The torch adapter feeding a GPU: batches pinned by the DataLoader and moved to CUDA, every record once.

Usage:  .venv/bin/python bench/gpu_loader.py

Serves the project as the other benches do (bench/_env.py: the ASGI server
of tests/support.py on DATABASE_URL, else the embedded Postgres) and reads
two jobs of CSV lines ``id,value`` (6 files of 500 lines, shuffled) with
``pin_memory=True``, each batch moved to the GPU with ``non_blocking=True``:

  WorkQueueLoader(WorkQueueDataset(queue, reader=readers.records), num_workers=2)
  DataLoader(WorkQueueDataset(queue, reader=readers.records), num_workers=0)

Each must hand over every record exactly once, its values intact, and on a
machine with CUDA every batch pinned. Prints one line per loader and exits
nonzero if either fails. Without CUDA the batches stay on the CPU (pinning
is then not checked): the rest of the check still runs.
"""

import os
import sys
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path

from _env import serve  # first: it sets up the project

FILES, LINES = 6, 500


def collate(lines):
    import torch

    return torch.tensor([[float(v) for v in bytes(line).split(b",")] for line in lines], dtype=torch.float64)


def main():
    import torch
    from torch.utils.data import DataLoader

    from worker_sdk import WorkQueue, readers
    from worker_sdk.torch import WorkQueueDataset, WorkQueueLoader

    cuda = torch.cuda.is_available()
    device = torch.device("cuda" if cuda else "cpu")
    print(f"torch {torch.__version__}, cuda available {cuda}", flush=True)
    if cuda:
        print(f"device: {torch.cuda.get_device_name(0)}; {os.cpu_count()} CPUs", flush=True)
    else:
        print("WARNING: no CUDA: batches stay on the CPU, pin_memory is not exercised", flush=True)

    folder = Path(tempfile.mkdtemp(prefix="shardline-gpu-check-"))
    works, n = [], 0
    for f in range(FILES):
        path = folder / f"part-{f}.csv"
        rows = []
        for _ in range(LINES):
            rows.append(f"{n},{n * 0.5}\n")
            n += 1
        path.write_text("".join(rows))
        works.append(str(path))
    total = n

    began = time.time()
    server, key = serve("gpu check", workers=2)
    print(f"server up in {time.time() - began:.1f} s at {server.url}", flush=True)
    ok = True
    try:
        for label, kind, loaders in (
            ("WorkQueueLoader, 2 loaders", WorkQueueLoader, 2),
            ("DataLoader, 0 loaders", DataLoader, 0),
        ):
            queue = WorkQueue(
                works, shuffle=True, name=f"gpu-check-{uuid.uuid4().hex[:8]}", url=server.url, token=key, worker="gpu0"
            )
            dataset = WorkQueueDataset(queue, reader=readers.records)
            loader = kind(dataset, batch_size=64, num_workers=loaders, collate_fn=collate, pin_memory=cuda)
            seen, pinned, batches, value_sum = Counter(), 0, 0, 0.0
            start = time.perf_counter()
            for batch in loader:
                pinned += bool(cuda and batch.is_pinned())
                on_device = batch.to(device, non_blocking=True)
                assert on_device.device.type == device.type
                ids = on_device[:, 0].long()
                value_sum += float((on_device[:, 1] * 2 - on_device[:, 0]).abs().sum())  # 0 if values arrived intact
                seen.update(ids.cpu().tolist())
                batches += 1
            if cuda:
                torch.cuda.synchronize()
            seconds = time.perf_counter() - start
            queue.close()
            exactly_once = seen == Counter(range(total))
            all_pinned = (pinned == batches) if cuda else None
            passed = exactly_once and value_sum == 0.0 and (all_pinned is not False)
            ok &= passed
            print(
                f"{label}: {batches} batches on {device}, pinned {pinned}/{batches}, records {sum(seen.values())}/{total}, "
                f"exactly once {exactly_once} (dup {sum(1 for c in seen.values() if c > 1)}, "
                f"missing {total - len(seen)}), values intact {value_sum == 0.0}, {seconds:.2f} s -> "
                f"{'PASS' if passed else 'FAIL'}",
                flush=True,
            )
    finally:
        server.stop()
    print("gpu loader check:", "PASS" if ok else "FAIL", flush=True)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
