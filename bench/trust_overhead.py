"""Trust checks' cost: take+complete over HTTP, the code before issue 25 beside today's, in one run.

Usage:  DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres \\
        .venv/bin/python bench/trust_overhead.py [--clients 4] [--seconds 5] [--rounds 4] [--base f38dda3]

Starts two servers side by side, each as `make run` serves (gunicorn with
uvicorn workers over server.asgi), each on its own fresh database on the
DATABASE_URL server (bench_trust_base, bench_trust_now, dropped at the end):
  base     git revision --base (default f38dda3: main before issue 25's lease
           holders, random fencing tokens, job scopes and per-user keys),
           checked out with `git worktree add` at --worktree (created when
           missing) and imported from there (cwd and PYTHONPATH)
  now      the working tree, with an unscoped worker token
  scoped   the working tree, with a worker token scoped to jobs=["bench-*"]
           (every lease statement then matches the job's name)
Each configuration has its own job of --items items. Every round runs
bench/dispatch.py's http-keyed arm (C client processes, count=1, the previous
lease's completion piggybacked, an Idempotency-Key per take, kept-alive
connections) against each configuration in turn (base, now, scoped, base,
..., the order turning each round), so the machine's noise falls on all alike; a short warm-up round of
each comes first and is not counted. Both databases are vacuumed after each
measurement, as autovacuum would (it is off on some machines). Prints each round, the median items/s
per configuration and the ratios now/base and scoped/base (issue 25's bar:
>= 0.95).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import urllib.request
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

sys.path.insert(0, str(Path(__file__).resolve().parent))

import dispatch  # noqa: E402  (its client loop, and _env's set-up of the project)
from _env import ROOT  # noqa: E402

# Run in each tree (cwd and PYTHONPATH set to it), so that tree's code makes
# the database, the user, its tokens and the jobs: argv = items, job tags.
SETUP = """
import inspect, json, os, sys, uuid
sys.path.insert(0, os.getcwd())
import django
django.setup()
from django.core.management import call_command
import server
from server.services import accounts, jobs
call_command("migrate", verbosity=0, interactive=False)
user, _ = accounts.ensure_user("bench", "worker")
out = {"server": server.__file__, "tokens": {"plain": accounts.create_token(user, "worker", name="bench")[1]}}
if "jobs" in inspect.signature(accounts.create_token).parameters:
    out["tokens"]["scoped"] = accounts.create_token(user, "worker", name="scoped", jobs=["bench-*"])[1]
works = [f"/bench/{i:07d}" for i in range(int(sys.argv[1]))]
out["jobs"] = {
    tag: jobs.create_or_attach(jobs.JobSpec(name=f"bench-{tag}-{uuid.uuid4().hex[:6]}", works=works, lease_timeout=300.0))[0].id
    for tag in sys.argv[2:]
}
print(json.dumps(out))
"""


def revision(tree: Path, name: str = "HEAD") -> str:
    done = subprocess.run(["git", "rev-parse", "--short", name], cwd=tree, capture_output=True, text=True, check=True)
    return done.stdout.strip()


def tree_env(tree: Path, db_url: str) -> dict:
    return {
        **os.environ,
        "PYTHONPATH": str(tree),
        "DATABASE_URL": db_url,
        "DJANGO_SETTINGS_MODULE": "server.settings",
        "LOG_LEVEL": "WARNING",
        "DATABASE_CONN_MAX_AGE": "600",
    }


def serve(tree: Path, env: dict, workers: int) -> tuple[subprocess.Popen, str]:
    """gunicorn over server.asgi with uvicorn workers, as `make run` serves, importing ``tree``'s code."""
    from tests.support import free_port, wait_until

    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "server.asgi", "--worker-class", "uvicorn_worker.UvicornWorker"]
        + ["--chdir", str(tree), "--bind", f"127.0.0.1:{port}", "--workers", str(workers)]
        + ["--graceful-timeout", "2", "--log-level", "warning"],
        cwd=tree,
        env=env,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"

    def healthy():
        if process.poll() is not None:
            raise RuntimeError(f"gunicorn in {tree} exited with {process.returncode}")
        try:
            with urllib.request.urlopen(url + "/healthz", timeout=5) as response:
                return response.status == 200
        except OSError:
            return False

    wait_until(healthy, 60, 0.2, f"the server of {tree} to answer /healthz")
    return process, url


def first_token(url: str, key: str, job_id: int) -> int:
    """One take's fencing token: the base's come from a sequence (small), today's are random 63-bit numbers."""
    request = urllib.request.Request(
        f"{url}/api/v1/jobs/{job_id}/leases/",
        data=json.dumps({"worker": "probe", "count": 1}).encode(),
        headers={"Authorization": f"Token {key}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return int(json.loads(response.read())["leases"][0]["token"])


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=5.0, help="seconds per configuration per round")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--warmup", type=float, default=2.0, help="seconds of an uncounted first round")
    parser.add_argument("--web-workers", type=int, default=4)
    parser.add_argument("--items", type=int, default=60_000, help="items per job (each configuration has its own)")
    parser.add_argument("--base", default="f38dda3", help="git revision measured as the base")
    parser.add_argument("--worktree", default="/tmp/shardline-base")
    args = parser.parse_args()

    import psycopg

    admin_url = os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/postgres")
    base_tree, now_tree = Path(args.worktree), ROOT
    if not (base_tree / "server").is_dir():
        subprocess.run(["git", "worktree", "add", "--detach", str(base_tree), args.base], cwd=ROOT, check=True)
    dirty = subprocess.run(["git", "status", "--porcelain", "server", "migrations"], cwd=ROOT, capture_output=True)
    if revision(base_tree) != revision(ROOT, args.base):
        raise SystemExit(f"{base_tree} is not at {args.base}: remove it (git worktree remove --force {base_tree})")

    parts = urlsplit(admin_url)
    dbs = {"base": "bench_trust_base", "now": "bench_trust_now"}
    urls = {tag: urlunsplit(parts._replace(path="/" + name)) for tag, name in dbs.items()}
    with psycopg.connect(admin_url, autocommit=True) as admin:
        for name in dbs.values():
            admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
            admin.execute(f"CREATE DATABASE {name}")

    servers = []
    try:
        made = {}
        # The base database gets an idle second job so both hold the same rows.
        for tag, tree, tags in (("base", base_tree, ["base", "idle"]), ("now", now_tree, ["now", "scoped"])):
            env = tree_env(tree, urls[tag])
            done = subprocess.run(
                [sys.executable, "-c", SETUP, str(args.items), *tags],
                cwd=tree,
                env=env,
                capture_output=True,
                text=True,
            )
            if done.returncode:
                raise SystemExit(f"setting up {tag} in {tree} failed:\n{done.stderr[-3000:]}")
            made[tag] = json.loads(done.stdout.strip().splitlines()[-1])
            if not made[tag]["server"].startswith(str(tree) + "/"):
                raise SystemExit(f"{tag} imported {made[tag]['server']}, not the code in {tree}")
            process, url = serve(tree, env, args.web_workers)
            servers.append(process)
            made[tag]["url"] = url
        configs = {
            "base": (made["base"]["url"], made["base"]["tokens"]["plain"], made["base"]["jobs"]["base"]),
            "now": (made["now"]["url"], made["now"]["tokens"]["plain"], made["now"]["jobs"]["now"]),
            "scoped": (made["now"]["url"], made["now"]["tokens"]["scoped"], made["now"]["jobs"]["scoped"]),
        }
        tokens = {name: first_token(*config) for name, config in configs.items()}
        print(f"base: {args.base} from {made['base']['server']} (a fencing token: {tokens['base']})")
        print(
            f"now:  {revision(now_tree)}{' + uncommitted server/ edits' if dirty.stdout else ''} from "
            f"{made['now']['server']} (fencing tokens: {tokens['now']}, {tokens['scoped']})",
            flush=True,
        )

        def measure(name, seconds):
            url, key, job_id = configs[name]
            clients = [(i, (None,)) for i in range(args.clients)]
            return dispatch.run_arm(dispatch.http_client, lambda i: (url, key, job_id, 1, True), clients, seconds)

        def vacuumed(result):
            # What autovacuum does in a deployment (it is off on some
            # machines, where dead rows pile up): the now database takes two
            # configurations' writes, and without this its plans slow first.
            for url in urls.values():
                with psycopg.connect(url, autocommit=True) as db:
                    db.execute("VACUUM ANALYZE")
            return result

        for name in configs:
            vacuumed(measure(name, args.warmup))
        rounds = []
        for number in range(1, args.rounds + 1):
            # The order turns each round: whichever configuration follows
            # another server's turn finds its own server cold.
            names = list(configs)
            order = names[number % len(names) :] + names[: number % len(names)]
            measured = {name: vacuumed(measure(name, args.seconds)) for name in order}
            rounds.append({name: measured[name] for name in configs})
            print(
                f"round {number}: "
                + ", ".join(f"{n} {r['items_per_s']:.0f}/s p50 {r['p50_ms']:.1f} ms" for n, r in rounds[-1].items()),
                flush=True,
            )
    finally:
        for process in servers:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
                try:
                    process.wait(15)
                except subprocess.TimeoutExpired:
                    os.killpg(process.pid, signal.SIGKILL)
        with psycopg.connect(admin_url, autocommit=True) as admin:
            for name in dbs.values():
                admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")

    print(
        f"\n{args.rounds} rounds x {args.seconds:.0f} s per configuration, {args.clients} client processes, "
        f"{args.web_workers} gunicorn (uvicorn) workers per server, {os.cpu_count()} CPUs, count=1, keyed"
    )
    print(f"{'configuration':<14}{'median items/s':>15}{'min-max':>13}{'p50 ms':>9}{'p99 ms':>9}")
    medians = {}
    for name in configs:
        rates = [r[name]["items_per_s"] for r in rounds]
        medians[name] = statistics.median(rates)
        p50 = statistics.median(r[name]["p50_ms"] for r in rounds)
        p99 = statistics.median(r[name]["p99_ms"] for r in rounds)
        span = f"{min(rates):.0f}-{max(rates):.0f}"
        print(f"{name:<14}{medians[name]:>15.0f}{span:>13}{p50:>9.2f}{p99:>9.2f}")
    print()
    for name in ("now", "scoped"):
        per_round = sorted(r[name]["items_per_s"] / r["base"]["items_per_s"] for r in rounds)
        print(
            f"{name + '/base':<13}{medians[name] / medians['base']:.2f}   (per round: median "
            f"{statistics.median(per_round):.2f}, {per_round[0]:.2f}-{per_round[-1]:.2f}; target >= 0.95)"
        )


if __name__ == "__main__":
    main()
