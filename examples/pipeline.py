"""A data pipeline on Fray: an actor group of workers, shards handed to whoever is ready.

The driver writes ``--shards`` input files (generated text) through fsspec, creates an actor
group of ``--workers`` ``ShardWorker`` actors and hands each ready worker one shard at a time;
a worker reads its shard from storage, counts the words and writes the counts to the output
folder. Only paths travel in the calls; the data moves through storage.

When a worker dies its shard goes back in the queue and the next ready worker takes it.
``--kill-at-shard K`` makes the worker that gets shard ``K`` first die on purpose (the method
raises ``SystemExit``, which ends an actor on every backend), to show that. At the end the
driver checks that every shard has exactly one output, that each output equals the counts the
driver expects from the input it wrote, that every shard was accepted exactly once and that no
stray file is in the output folder; it prints one final line and exits 1 if a check fails.

    python examples/pipeline.py --workers 3 --shards 12 --kill-at-shard 2
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import json
import os
import random
import sys
import tempfile
import time
from collections.abc import Sequence
from typing import Any

from fray import ActorConfig, ResourceConfig, current_actor, current_client
from fray.errors import ActorDiedError, ActorError, FrayError

# fmt: off
WORDS = (
    "actor", "alpha", "batch", "beta", "checkpoint", "data", "delta", "epoch", "gamma",
    "gradient", "job", "kernel", "lambda", "loss", "model", "node", "omega", "pod", "queue",
    "replica", "shard", "slice", "step", "tensor", "token", "vector", "weight",
)
# fmt: on
POLL_S = 0.01  # how often the driver looks at in-flight calls


def _open(url: str, mode: str = "r") -> Any:
    """Opens any fsspec URL (or plain path); writing creates the parent folders."""
    import fsspec

    fs, path = fsspec.core.url_to_fs(url)
    parent = path.rsplit("/", 1)[0]
    if "w" in mode and parent and parent != path:
        fs.makedirs(parent, exist_ok=True)
    return fs.open(path, mode)


def _join(url: str, *parts: str) -> str:
    return "/".join([url.rstrip("/"), *parts])


def shard_name(shard: int) -> str:
    return f"shard-{shard:05d}"


def make_input(shard: int, lines: int, seed: int) -> str:
    """The text of one input shard (deterministic, so the driver can recompute it)."""
    rng = random.Random(seed * 100_003 + shard)
    return "".join(" ".join(rng.choices(WORDS, k=rng.randint(3, 12))) + "\n" for _ in range(lines))


def count_words(text: str) -> dict[str, Any]:
    """What a worker computes for one shard."""
    counts = collections.Counter(text.split())
    digest = hashlib.sha256(json.dumps(sorted(counts.items())).encode()).hexdigest()
    return {
        "lines": text.count("\n"),
        "words": sum(counts.values()),
        "counts": dict(sorted(counts.items())),
        "sha256": digest,
    }


# ---------------------------------------------------------------------------------------------
# The worker (module level: workers unpickle it)


class ShardWorker:
    """Processes one shard per call: reads it from storage, writes its word counts back."""

    def __init__(self) -> None:
        ctx = current_actor()
        self.name = f"{ctx.group_name}-{ctx.index}"
        self.done = 0

    def process(self, shard: int, input_url: str, output_url: str, die: bool = False) -> dict:
        """Counts the words of ``input_url`` and writes them to ``output_url``."""
        import fsspec

        if die:
            print(f"{self.name}: dying on request while holding shard {shard}", flush=True)
            raise SystemExit(3)
        with _open(input_url, "r") as f:
            result = count_words(f.read())
        record = {"shard": shard, "worker": self.name, **result}
        fs, path = fsspec.core.url_to_fs(output_url)
        partial = f"{path}.partial-{os.getpid()}-{self.done}"
        with fs.open(partial, "w") as f:
            json.dump(record, f)
        fs.mv(partial, path)  # the output appears whole or not at all
        self.done += 1
        return {"shard": shard, "worker": self.name, "output": output_url, "words": record["words"]}


# ---------------------------------------------------------------------------------------------
# The driver


class Dispatcher:
    """Hands queued shards to idle workers and reassigns the shards of workers that die."""

    def __init__(self, group: Any, urls: dict[int, tuple[str, str]], kill_at: int | None) -> None:
        self.group = group
        self.urls = urls
        self.kill_at = kill_at
        self.queue = collections.deque(sorted(urls))
        self.idle: list[Any] = []
        self.known: set[str] = set()
        self.in_flight: list[tuple[Any, Any, int]] = []  # (future, worker, shard)
        self.accepted: list[dict[str, Any]] = []
        self.dead: list[str] = []
        self.reassigned: list[int] = []
        self.losses: list[dict[str, str]] = []  # how each retired worker was lost
        self.events: list[str] = []

    def log(self, text: str) -> None:
        self.events.append(text)
        print(f"pipeline: {text}", flush=True)

    def add_workers(self, handles: list[Any]) -> None:
        """Puts newly ready workers in the idle list (each worker once)."""
        for worker in handles:
            if worker.name not in self.known:
                self.known.add(worker.name)
                self.log(f"worker {worker.name} is ready")
                self.idle.append(worker)

    def run(self, deadline: float) -> None:
        while self.queue or self.in_flight:
            self.add_workers(self.group.discover_new())
            while self.queue and self.idle:
                worker, shard = self.idle.pop(0), self.queue.popleft()
                die = shard == self.kill_at
                if die:
                    self.kill_at = None  # only the first holder of that shard dies
                input_url, output_url = self.urls[shard]
                future = worker.process.remote(shard, input_url, output_url, die)
                self.in_flight.append((future, worker, shard))
            for item in [i for i in self.in_flight if i[0].done()]:
                self.in_flight.remove(item)
                self.settle(*item)
            if not self.idle and not self.in_flight and self.queue and self.group.is_done():
                raise FrayError(f"every worker is gone with {len(self.queue)} shards left")
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"{len(self.queue)} shards queued and {len(self.in_flight)} in flight at "
                    "the deadline"
                )
            time.sleep(POLL_S)

    def settle(self, future: Any, worker: Any, shard: int) -> None:
        try:
            done = future.result(timeout=0)
        except ActorError as exc:
            # ActorDiedError: the worker is gone. Any other ActorError means it could not be
            # reached; either way it gets no more work and its shard goes to another worker.
            self.dead.append(worker.name)
            self.reassigned.append(shard)
            self.losses.append({"worker": worker.name, "error": type(exc).__name__})
            self.queue.appendleft(shard)
            how = "died" if isinstance(exc, ActorDiedError) else "cannot be reached"
            self.log(f"worker {worker.name} {how} ({exc}); shard {shard} goes back in the queue")
            return
        self.accepted.append(done)
        self.idle.append(worker)
        self.log(f"shard {shard} done by {done['worker']} ({done['words']} words)")


def check(
    args: argparse.Namespace, dispatcher: Dispatcher, output_root: str
) -> tuple[list[str], dict[str, Any]]:
    """Exactly once: one output per shard, equal to what its input gives, accepted once."""
    import fsspec

    problems: list[str] = []
    accepted = collections.Counter(d["shard"] for d in dispatcher.accepted)
    twice = sorted(s for s, n in accepted.items() if n > 1)
    missing = sorted(set(range(args.shards)) - set(accepted))
    if twice or missing:
        problems.append(f"shards accepted twice {twice}, never {missing}")
    fs, root = fsspec.core.url_to_fs(output_root)
    names = sorted(p.rstrip("/").rsplit("/", 1)[-1] for p in fs.ls(root, detail=False))
    expected_names = [f"{shard_name(s)}.json" for s in range(args.shards)]
    if names != expected_names:
        extra = sorted(set(names) - set(expected_names))
        absent = sorted(set(expected_names) - set(names))
        problems.append(f"output folder has extra files {extra} and lacks {absent}")
    by_worker: collections.Counter[str] = collections.Counter()
    writer: dict[int, str] = {}
    for shard in range(args.shards):
        url = _join(output_root, f"{shard_name(shard)}.json")
        if not fs.exists(fsspec.core.url_to_fs(url)[1]):
            continue
        with _open(url, "r") as f:
            record = json.load(f)
        want = count_words(make_input(shard, args.lines, args.seed))
        if record["shard"] != shard or record["counts"] != want["counts"]:
            problems.append(f"output of shard {shard} is wrong")
        by_worker[record["worker"]] += 1
        writer[shard] = record["worker"]
    if args.kill_at_shard is not None:
        if len(dispatcher.dead) != 1 or dispatcher.reassigned != [args.kill_at_shard]:
            problems.append(
                f"expected one dead worker and shard {args.kill_at_shard} reassigned; got "
                f"dead {dispatcher.dead}, reassigned {dispatcher.reassigned}"
            )
        redone = writer.get(args.kill_at_shard)
        if redone is None or redone in dispatcher.dead:
            problems.append(f"shard {args.kill_at_shard} was not redone by a live worker")
    elif dispatcher.dead:
        problems.append(f"workers died without being asked to: {dispatcher.dead}")
    summary = {
        "ok": not problems,
        "shards": args.shards,
        "workers": args.workers,
        "accepted": dict(sorted((str(k), v) for k, v in accepted.items())),
        "outputs": names,
        "by_worker": dict(by_worker),
        "dead": dispatcher.dead,
        "reassigned": dispatcher.reassigned,
        "losses": dispatcher.losses,
        "problems": problems,
    }
    return problems, summary


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--workers", type=int, default=3, help="actors in the group")
    parser.add_argument("--shards", type=int, default=12, help="input files")
    parser.add_argument("--lines", type=int, default=200, help="lines per input file")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--kill-at-shard",
        type=int,
        metavar="K",
        help="the worker that first gets shard K dies (to show reassignment)",
    )
    parser.add_argument("--storage-url", help="fsspec URL for inputs and outputs (default: temp)")
    parser.add_argument("--name", default="pipeline", help="actor group name")
    parser.add_argument("--timeout", type=float, default=600, help="seconds for the whole run")
    parser.add_argument("--report", help="also write the summary as JSON here")
    args = parser.parse_args(argv)
    for flag in ("workers", "shards", "lines"):
        if getattr(args, flag) < 1:
            parser.error(f"--{flag} must be at least 1")
    if args.kill_at_shard is not None:
        if not 0 <= args.kill_at_shard < args.shards:
            parser.error(f"--kill-at-shard must be between 0 and {args.shards - 1}")
        if args.workers < 2:
            parser.error("--kill-at-shard needs at least 2 workers (one of them dies)")
    if args.storage_url is None:
        args.storage_url = "file://" + tempfile.mkdtemp(prefix="fray-pipeline-")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """Writes the inputs, runs the workers over them and checks the outputs."""
    import fsspec

    args = parse_args(argv)
    deadline = time.monotonic() + args.timeout
    input_root = _join(args.storage_url, "input")
    output_root = _join(args.storage_url, "output")
    fs, _ = fsspec.core.url_to_fs(args.storage_url)
    fs.makedirs(fsspec.core.url_to_fs(output_root)[1], exist_ok=True)
    urls: dict[int, tuple[str, str]] = {}
    for shard in range(args.shards):
        input_url = _join(input_root, f"{shard_name(shard)}.txt")
        with _open(input_url, "w") as f:
            f.write(make_input(shard, args.lines, args.seed))
        urls[shard] = (input_url, _join(output_root, f"{shard_name(shard)}.json"))

    client = current_client()
    print(
        f"pipeline: backend {client.scheme}, {args.workers} workers, {args.shards} shards at "
        f"{args.storage_url}",
        flush=True,
    )
    try:
        group = client.create_actor_group(
            ShardWorker,
            name=args.name,
            count=args.workers,
            resources=ResourceConfig(cpu=0.5, ram="512m"),
            # A dead worker stays dead: the driver moves its work, not the backend.
            actor_config=ActorConfig(max_restarts=0),
        )
        first = group.wait_ready(count=1, timeout=max(deadline - time.monotonic(), 1.0))
        dispatcher = Dispatcher(group, urls, args.kill_at_shard)
        dispatcher.add_workers(first)
        dispatcher.run(deadline)
        group.shutdown()
    except (FrayError, TimeoutError) as exc:
        # A job failed or timed out, or the backend gave up: say so on the final line.
        print(f"pipeline: FAILED: {type(exc).__name__}: {exc}", flush=True)
        return 1
    finally:
        client.shutdown()
    problems, summary = check(args, dispatcher, output_root)
    summary["backend"] = client.scheme
    if args.report:
        with _open(args.report, "w") as f:
            json.dump(summary, f, indent=2)
    if problems:
        print("pipeline: FAILED: " + "; ".join(problems), flush=True)
        return 1
    print(
        f"pipeline: OK on {client.scheme}: {args.shards} shards, each output exactly once, "
        f"by workers {summary['by_worker']}; dead {dispatcher.dead or 'none'}, reassigned "
        f"{dispatcher.reassigned or 'none'}",
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
