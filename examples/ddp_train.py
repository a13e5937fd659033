"""Synchronous DDP training over a WorkQueue: every rank runs each epoch's same steps, and nothing is lost.

    SHARDLINE_URL=http://localhost:8000 SHARDLINE_TOKEN=... SHARDLINE_RUN=ddp-1 \
        .venv/bin/torchrun --standalone --nproc_per_node=2 examples/ddp_train.py .shardline/sample/*.csv

gloo on the CPU; NCCL, one GPU per rank, when CUDA is available. Each CSV
line is ``a,b,label`` (the sample job's files, from ``make run``). The files
are sliced (``num_slices``), so each epoch's steps are known up front and
SyncLoader runs exactly that many on every rank, however unevenly the queue
deals the slices; the few records an epoch leaves (fewer than a global
batch) are read first in the next one.

With ``--checkpoint DIR`` the model and the queue's position are saved with
torch.distributed.checkpoint after every epoch: started again (by
``torchrun --max-restarts``, or by hand with the same SHARDLINE_RUN and any
number of ranks) it resumes at the next epoch with exactly the data not yet
trained on.
"""

import argparse
import os
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

from worker_sdk import WorkQueue
from worker_sdk.torch import QueueState, SyncLoader


def parse(line: bytes) -> list[float]:
    a, b, label = line.decode().split(",")
    return [float(a) / 100.0, float(b) / 1000.0, float(label) / 10.0]


def collate(lines: list[bytes]) -> torch.Tensor:
    return torch.tensor([parse(line) for line in lines])


class Trainer:
    """The model and optimizer as one ``Stateful`` for torch.distributed.checkpoint."""

    def __init__(self, model, optimizer):
        self.model, self.optimizer = model, optimizer

    def state_dict(self):
        model, optimizer = get_state_dict(self.model, self.optimizer)
        return {"model": model, "optimizer": optimizer}

    def load_state_dict(self, state):
        set_state_dict(self.model, self.optimizer, model_state_dict=state["model"], optim_state_dict=state["optimizer"])


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch", type=int, default=32, help="records per rank and step")
    parser.add_argument("--slices", type=int, default=48)
    parser.add_argument("--loaders", type=int, default=2, help="DataLoader processes per rank")
    parser.add_argument("--checkpoint", default=None, help="a folder for torch.distributed.checkpoint")
    parser.add_argument("files", nargs="+")
    args = parser.parse_args()

    queue = WorkQueue(args.files, num_epochs=args.epochs, num_slices=args.slices, name="ddp_train")
    cuda = torch.cuda.is_available()
    if cuda:
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", 0)))
    # A peer that stops answering fails the collective after the lease timeout,
    # not the 30-minute default (docs/synchronous.md).
    timeout = timedelta(seconds=queue.job["lease_timeout"])
    dist.init_process_group("nccl" if cuda else "gloo", timeout=timeout)
    rank, device = dist.get_rank(), torch.device("cuda" if cuda else "cpu")

    model = torch.nn.Sequential(torch.nn.Linear(2, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1)).to(device)
    model = torch.nn.parallel.DistributedDataParallel(model)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    loader = SyncLoader(queue, batch_size=args.batch, num_workers=args.loaders, collate_fn=collate)
    state = {"trainer": Trainer(model, optimizer), "queue": QueueState(queue, loader)}
    if args.checkpoint and os.path.exists(os.path.join(args.checkpoint, ".metadata")):
        dcp.load(state, checkpoint_id=args.checkpoint)  # the model, and the queue back to the saved epoch's end
        if rank == 0:
            print(f"resumed at epoch {loader.epoch}", flush=True)

    for epoch in range(loader.epoch, args.epochs):
        loader.set_epoch(epoch)
        total = torch.zeros(1, device=device)
        for batch in loader:
            batch = batch.to(device)
            loss = torch.nn.functional.mse_loss(model(batch[:, :2]).squeeze(1), batch[:, 2])
            optimizer.zero_grad()
            loss.backward()  # DDP all-reduces the gradients: every rank runs this step
            optimizer.step()
            total += loss.detach()
        if rank == 0:
            steps, dropped = loader.stats.steps, loader.plan.dropped
            print(
                f"epoch {epoch}: {steps} steps a rank, mean loss {total.item() / max(steps, 1):.4f}, "
                f"{dropped} records left for the next epoch",
                flush=True,
            )
        if args.checkpoint:
            dcp.save(state, checkpoint_id=args.checkpoint)

    if rank == 0:
        marks = queue.watermarks()
        print(f"queue {marks['name']}: {marks['done']}/{marks['total']} items done, state {marks['state']}")
    queue.close()
    dist.barrier()  # no rank tears the process group down while another is still in its last collective
    # Unregisters the group; the SDK lets go of it last, at exit, once this
    # function's DDP model is gone (docs/synchronous.md, "Ending a rank"): keep the model
    # in a function, not in a global.
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
