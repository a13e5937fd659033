"""Prometheus metrics.

Lease operations are counted and timed where they happen (the services). Job
gauges are read from the counters table at scrape time by a collector, so they
are right across every web process without shared state. Under gunicorn,
``PROMETHEUS_MULTIPROC_DIR`` makes counters and histograms add up over worker
processes (``make run`` and docker-compose set it).
"""

from __future__ import annotations

import os
import time
from contextlib import contextmanager

from django.core.exceptions import ImproperlyConfigured
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily


def _ensure_multiprocess_dir():
    """Create PROMETHEUS_MULTIPROC_DIR when it is missing, or say why it cannot be.

    prometheus_client writes this process's files there as soon as a metric
    below is created, so a missing folder failed every command that imports
    the services (migrate, the Celery worker) with a bare FileNotFoundError on
    ``gauge_livesum_<pid>.db``. Creating it is safe from any process; wiping
    old files is the web server's start alone (the image's CMD, ``make run``),
    since a wipe here would drop the counts of gunicorn workers already running.
    """
    folder = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if not folder:
        return
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError as exc:
        raise ImproperlyConfigured(
            f"PROMETHEUS_MULTIPROC_DIR={folder!r} does not exist and cannot be created ({exc}); "
            "point it at a folder this user can write, or unset it"
        ) from exc
    if not os.access(folder, os.W_OK | os.X_OK):
        raise ImproperlyConfigured(
            f"PROMETHEUS_MULTIPROC_DIR={folder!r} is not writable by this user (uid {os.getuid()}); "
            "give it to the user that runs Shardline, or unset it"
        )


_ensure_multiprocess_dir()

LEASE_OPERATIONS = Counter(
    "shardline_lease_operations_total",
    "Lease operations by kind and outcome.",
    ["op", "outcome"],
)
LEASE_ITEMS = Counter(
    "shardline_lease_items_total",
    "Items affected by lease operations (a batched take counts each item).",
    ["op"],
)
LEASE_SECONDS = Histogram(
    "shardline_lease_operation_seconds",
    "Time spent in the service for one lease operation (database round trips included).",
    ["op"],
    buckets=(0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5),
)
# A lease's end other than its holder's complete or fail: it expired and a
# take gave its item to another worker (the holder died or stalled past its
# lease timeout), and the holder, if alive, was then refused (409 lease_lost)
# when it completed, failed, released, extended or split it.
LEASES_RECLAIMED = Counter(
    "shardline_leases_reclaimed_total",
    "Expired leases taken back by a take (their items pending again): workers that died or stalled past the lease timeout.",
)
HOLDERS_GONE = Counter(
    "shardline_holders_gone_total",
    "Holders whose waiting heartbeat's connection dropped unanswered and that did not beat again: their leases "
    "expired at once (a worker process that died).",
)
LEASES_LOST = Counter(
    "shardline_leases_lost_total",
    "Holders refused because their lease had expired and was taken back, or was fenced by a restore, by operation.",
    ["op"],
)
for _op in ("complete", "extend", "fail", "release", "split"):
    LEASES_LOST.labels(_op)  # exported at 0 from the start, so that a rate has a series to start from

WAITING_TAKES = Gauge(
    "shardline_waiting_takes",
    "Takes waiting server-side for work (long-polling), over all web processes.",
    multiprocess_mode="livesum",
)
TAKES_PARKED = Counter(
    "shardline_takes_parked_total",
    "Repeats of waiting takes that waited on without running: nothing had changed since they last ran.",
)


@contextmanager
def waiting_take():
    WAITING_TAKES.inc()
    try:
        yield
    finally:
        WAITING_TAKES.dec()


@contextmanager
def timed(op: str):
    start = time.perf_counter()
    outcome = "error"
    try:
        yield
        outcome = "ok"
    except Exception as exc:  # classify, then let it propagate
        outcome = getattr(exc, "code", "error")
        raise
    finally:
        LEASE_SECONDS.labels(op).observe(time.perf_counter() - start)
        LEASE_OPERATIONS.labels(op, outcome).inc()


class JobCollector:
    """Per-job item gauges and per-loop data-stall counters, for jobs not finished (or finished in the last hour)."""

    def collect(self):
        from . import progress, selectors

        items = GaugeMetricFamily(
            "shardline_job_items",
            "Items of a job by state (all epochs; expired leases count as pending).",
            labels=["job", "state"],
        )
        state = GaugeMetricFamily("shardline_job_state", "1 for the current state of a job.", labels=["job", "state"])
        workers = GaugeMetricFamily(
            "shardline_job_live_workers", "Workers of a running job seen recently.", labels=["job"]
        )
        splits = GaugeMetricFamily(
            "shardline_job_splits",
            "Pieces of leases' unread records split off to idle workers (the liquid tail), each a new item.",
            labels=["job"],
        )
        jobs = selectors.jobs_for_metrics()
        for job_progress in progress.of_jobs(jobs).values():
            name = job_progress.job.name
            for key in progress.COUNTS:
                items.add_metric([name, key], getattr(job_progress, key))
            state.add_metric([name, job_progress.job.state], 1)
            splits.add_metric([name], job_progress.job.splits)
            if job_progress.live_workers is not None:
                workers.add_metric([name], job_progress.live_workers)
        yield items
        yield state
        yield workers
        yield splits
        yield from self.data_stalls(jobs)
        # Dead item rows slow the take until vacuum removes them (an alert on
        # this growing without bound means autovacuum is off or cannot keep up).
        dead = GaugeMetricFamily(
            "shardline_item_dead_rows", "Dead row versions in the item table, as Postgres counts them."
        )
        dead.add_metric([], selectors.item_dead_rows())
        yield dead

    @staticmethod
    def data_stalls(jobs):
        """Each training loop's data stall, cumulative, as its heartbeats reported it (server/sql/extend.sql).

        Counters read from the database like the gauges above: a scrape of
        any web process has every loop's. Labelled by job and loop (``worker``:
        the process whose training loop waits), for the jobs above and loops
        that reported in the last hour.
        """
        from . import selectors

        waited = CounterMetricFamily(
            "shardline_data_wait_seconds",
            "Seconds a training loop waited for its next record or batch (its data stall).",
            labels=["job", "worker"],
        )
        total = CounterMetricFamily(
            "shardline_data_loop_seconds",
            "Seconds a training loop ran: its waits for data and its own work. Stall fraction: rate of "
            "shardline_data_wait_seconds_total over rate of this.",
            labels=["job", "worker"],
        )
        for job_name, worker, seconds_waited, seconds in selectors.data_stalls_for_metrics(jobs):
            waited.add_metric([job_name, worker], seconds_waited)
            total.add_metric([job_name, worker], seconds)
        yield waited
        yield total


def render() -> bytes:
    registry = CollectorRegistry()
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        from prometheus_client import multiprocess

        multiprocess.MultiProcessCollector(registry)
    else:
        for collector in (
            LEASE_OPERATIONS,
            LEASE_ITEMS,
            LEASE_SECONDS,
            LEASES_RECLAIMED,
            HOLDERS_GONE,
            LEASES_LOST,
            WAITING_TAKES,
            TAKES_PARKED,
        ):
            registry.register(collector)
    registry.register(JobCollector())
    return generate_latest(registry)
