"""One rank of a DDP run over a WorkQueue with SyncLoader, started by torchrun (tests/sync).

    torchrun --standalone --nproc_per_node=N tests/sync/ddp_rank.py --name NAME [--slices S] [--epochs E]
        [--batch B] [--loaders L] [--slow-rank R] [--slow 0.01] [--checkpoint DIR] [--die-at RANK:EPOCH:STEP]
        [--stop-after EPOCH] [--leave-at EPOCH:STEP] [--lagging-gloo] --out DIR WORK...

Each step is a real DDP step (a forward and a backward of a tiny model, whose
gradients every rank all-reduces), so ranks that ran different numbers of
steps would hang in it. Writes to OUT/rank<R>-<attempt>.txt, per epoch,
``epoch E steps N dropped D reread R`` and one ``read E RECORD`` line per
record trained on (a file per rank: torchrun's merged output can cut lines
of one rank into another's); with --checkpoint, saves
the queue's position with torch.distributed.checkpoint after every epoch and
resumes from it when it exists (a restarted run). With --lagging-gloo (Linux)
gloo's threads lag behind the rank's main thread, as on a loaded machine: what
the end of the process must survive (see lag_gloo_threads).
"""

import argparse
import faulthandler
import os
import signal
import time

import torch
import torch.distributed as dist

from worker_sdk import WorkQueue
from worker_sdk.torch import QueueState, SyncLoader


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--name", required=True)
    parser.add_argument("--slices", type=int, default=None)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--loaders", type=int, default=0)
    parser.add_argument("--slow-rank", type=int, default=-1)
    parser.add_argument("--slow", type=float, default=0.0, help="seconds a step of the slow rank takes")
    parser.add_argument("--checkpoint", default=None)
    parser.add_argument("--die-at", default=None, help="RANK:EPOCH:STEP: that rank SIGKILLs itself there (first run)")
    parser.add_argument("--stop-after", type=int, default=None, help="end the run after this epoch (and its save)")
    parser.add_argument("--leave-at", default=None, help="EPOCH:STEP: every rank leaves that epoch's loop there")
    parser.add_argument("--lagging-gloo", action="store_true", help="gloo's threads run late (lag_gloo_threads)")
    parser.add_argument("--out", required=True)
    parser.add_argument("works", nargs="+")
    args = parser.parse_args()
    faulthandler.register(signal.SIGUSR1, all_threads=True)  # a hung test shows where each rank was
    faulthandler.enable()  # and a rank that aborts, where it was

    dist.init_process_group("gloo")
    if args.lagging_gloo:
        lag_gloo_threads()
    rank = dist.get_rank()
    queue = WorkQueue(
        args.works, num_epochs=args.epochs, shuffle=False, num_slices=args.slices, name=args.name, worker=f"rank{rank}"
    )
    loader = SyncLoader(queue, batch_size=args.batch, num_workers=args.loaders)
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(1, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    state = {"queue": QueueState(queue, loader)}
    first_epoch = 0
    if args.checkpoint and os.path.exists(os.path.join(args.checkpoint, ".metadata")):
        import torch.distributed.checkpoint as dcp

        dcp.load(state, checkpoint_id=args.checkpoint)
        first_epoch = loader.epoch
        print(f"rank {rank} resumed at epoch {first_epoch}", flush=True)
    die = [int(part) for part in args.die_at.split(":")] if args.die_at else None
    leave = tuple(int(part) for part in args.leave_at.split(":")) if args.leave_at else None
    attempt = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    restarted = attempt > 0
    report = open(os.path.join(args.out, f"rank{rank}-{attempt}.txt"), "w")
    for epoch in range(first_epoch, args.epochs):
        loader.set_epoch(epoch)
        out = []
        for step, batch in enumerate(loader):
            if die and not restarted and (rank, epoch, step) == tuple(die):
                os.kill(os.getpid(), 9)
            if (epoch, step) == leave:
                break  # a loop that runs a set number of steps: the batch in hand is not trained on
            x = torch.ones(len(batch), 1)
            loss = model(x).sum()
            optimizer.zero_grad()
            loss.backward()  # DDP all-reduces the gradients: every rank must be here
            optimizer.step()
            if rank == args.slow_rank:
                time.sleep(args.slow)  # the slow rank's step: the straggler under test
            out += [f"read {epoch} {record.decode() if isinstance(record, bytes) else record}\n" for record in batch]
        stats = loader.stats
        report.write(f"epoch {epoch} steps {stats.steps} dropped {loader.plan.dropped} reread {stats.reread}\n")
        report.write("".join(out))
        report.flush()
        if args.checkpoint:
            import torch.distributed.checkpoint as dcp

            dcp.save(state, checkpoint_id=args.checkpoint)
        if epoch == args.stop_after:
            break
    report.close()
    queue.close()
    dist.barrier()  # no rank tears gloo down while another is still in its last collective
    dist.destroy_process_group()  # the SDK ends the group itself at exit (worker_sdk.collectives, end_process_groups)


def lag_gloo_threads():
    """Puts the rank on one CPU, and gloo's collective threads (pt_gloo_runloop) there at SCHED_IDLE.

    Such a thread then runs only while the main thread waits, so it lets go of
    a finished collective's tensors late: often after the main thread has gone
    on to end the process group, or the interpreter. That is the race at exit
    that a loaded machine loses now and then (docs/synchronous.md, "Ending a rank").
    """
    cpu = sorted(os.sched_getaffinity(0))[int(os.environ.get("LOCAL_RANK", "0")) % len(os.sched_getaffinity(0))]
    for tid in os.listdir("/proc/self/task"):
        os.sched_setaffinity(int(tid), {cpu})
        with open(f"/proc/self/task/{tid}/comm") as comm:
            if comm.read().strip() == "pt_gloo_runloop":
                os.sched_setscheduler(int(tid), os.SCHED_IDLE, os.sched_param(0))


if __name__ == "__main__":
    main()
