"""Document classification on Fray: an actor pool of classifiers over shards on disk.

The driver writes ``--shards`` shards of generated documents (JSON lines, through fsspec),
then starts an actor pool of ``Classifier`` actors that grows from one member to
``--workers`` while shards wait. Each classifier builds its model once, in ``__init__``: a
logistic regression over hashed words, trained with numpy on a small labelled set that this
file generates (no download). ``pool.map`` hands each shard to a free member; the member reads
the shard, scores every document and writes the scores back as an output shard.

``--kill-at-shard K`` makes the member that first gets shard ``K`` end its process
(``SystemExit``); the pool sends that shard to another member. At the end the driver checks
that every document was scored exactly once (one output line per document, none missing, no
stray file), that each score equals the one the driver's own copy of the model gives, and
that the pool re-dispatched exactly the shards whose member died; it prints one final line
and exits 1 if a check fails.

    python examples/classify.py --workers 3 --shards 12 --kill-at-shard 4
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import random
import sys
import tempfile
import time
import zlib
from collections.abc import Sequence
from typing import Any

from fray import ActorConfig, ResourceConfig, current_actor, current_client
from fray.errors import FrayError

# fmt: off
GOOD = (
    "analysis", "careful", "clear", "evidence", "explains", "measured", "method", "proof",
    "reference", "results", "study", "theorem", "thorough", "verified", "well-written",
)
SPAM = (
    "bonus", "buy", "cheap", "click", "deal", "free", "hurry", "limited", "offer", "prize",
    "subscribe", "today", "unbelievable", "winner", "now",
)
FILLER = ("the", "a", "of", "and", "this", "page", "with", "for", "you", "more")
# fmt: on
FEATURES = 256  # hashed vocabulary size


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


def document(rng: random.Random, good: bool) -> str:
    """One document: mostly filler, with words of its class and a few of the other."""
    own, other = (GOOD, SPAM) if good else (SPAM, GOOD)
    words = rng.choices(FILLER, k=rng.randint(6, 14)) + rng.choices(own, k=rng.randint(3, 6))
    words += rng.choices(other, k=rng.randint(0, 1))
    rng.shuffle(words)
    return " ".join(words)


def make_shard(shard: int, docs: int, seed: int) -> list[dict[str, Any]]:
    """The documents of one input shard (deterministic, so the driver can recompute it)."""
    rng = random.Random(seed * 100_003 + shard)
    out = []
    for i in range(docs):
        good = rng.random() < 0.5
        out.append({"id": f"{shard:05d}-{i:04d}", "text": document(rng, good), "label": good})
    return out


def features(text: str) -> Any:
    """Hashed bag of words, as a numpy vector."""
    import numpy as np

    x = np.zeros(FEATURES)
    for word in text.split():
        x[zlib.crc32(word.encode()) % FEATURES] += 1.0
    return x


def train(seed: int = 7, examples: int = 200, steps: int = 300) -> Any:
    """Logistic-regression weights from a small labelled set generated here (deterministic:
    every actor, and the driver, builds the same model)."""
    import numpy as np

    rng = random.Random(seed)
    labels = [i % 2 == 0 for i in range(examples)]
    x = np.stack([features(document(rng, good)) for good in labels])
    y = np.array(labels, dtype=float)
    w = np.zeros(FEATURES + 1)
    xb = np.hstack([x, np.ones((examples, 1))])
    for _ in range(steps):
        p = 1.0 / (1.0 + np.exp(-xb @ w))
        w -= 0.5 * xb.T @ (p - y) / examples
    return w


def score(w: Any, text: str) -> float:
    """The probability that ``text`` is a good document."""
    import numpy as np

    z = float(np.dot(w[:-1], features(text)) + w[-1])
    return round(1.0 / (1.0 + float(np.exp(-z))), 6)


class Classifier:
    """A pool member: builds the model once, then scores one shard per call."""

    def __init__(self) -> None:
        ctx = current_actor()
        self.name = f"{ctx.group_name}-{ctx.index}"
        self.weights = train()

    def score_shard(self, task: dict[str, Any]) -> dict[str, Any]:
        """Scores every document of ``task["input"]`` into ``task["output"]``; with a
        ``task["marker"]`` file not yet there, creates it and ends this actor's process first."""
        import fsspec

        shard, input_url, output_url, marker = (
            task["shard"],
            task["input"],
            task["output"],
            task["marker"],
        )
        if marker is not None:
            fs, path = fsspec.core.url_to_fs(marker)
            if not fs.exists(path):
                fs.touch(path)
                print(f"{self.name}: ending my process while holding shard {shard}", flush=True)
                raise SystemExit(3)
        with _open(input_url) as f:
            docs = [json.loads(line) for line in f]
        lines = [
            json.dumps({"id": d["id"], "score": score(self.weights, d["text"]), "by": self.name})
            for d in docs
        ]
        fs, path = fsspec.core.url_to_fs(output_url)
        partial = f"{path}.partial-{self.name}-{os.getpid()}"
        fs.makedirs(path.rsplit("/", 1)[0], exist_ok=True)
        with fs.open(partial, "w") as f:
            f.write("\n".join(lines) + "\n")
        fs.mv(partial, path)  # the output appears whole or not at all
        return {"shard": shard, "worker": self.name, "docs": len(docs)}


def check(args: argparse.Namespace, output_root: str, results: list[dict]) -> dict[str, Any]:
    """Exactly once: each document scored once, as the driver's model scores it."""
    import fsspec

    weights = train()
    problems: list[str] = []
    fs, root = fsspec.core.url_to_fs(output_root)
    names = sorted(p.rstrip("/").rsplit("/", 1)[-1] for p in fs.ls(root, detail=False))
    expected = [f"shard-{s:05d}.jsonl" for s in range(args.shards)]
    if names != expected:
        problems.append(f"output files {names} are not {expected}")
    seen: collections.Counter[str] = collections.Counter()
    correct = total = wrong_scores = 0
    for shard in range(args.shards):
        docs = {d["id"]: d for d in make_shard(shard, args.docs, args.seed)}
        url = _join(output_root, f"shard-{shard:05d}.jsonl")
        if not fs.exists(fsspec.core.url_to_fs(url)[1]):
            continue
        with _open(url) as f:
            for line in f:
                record = json.loads(line)
                seen[record["id"]] += 1
                doc = docs.get(record["id"])
                if doc is None or record["score"] != score(weights, doc["text"]):
                    wrong_scores += 1
                    continue
                total += 1
                correct += (record["score"] >= 0.5) == doc["label"]
    every = {d["id"] for s in range(args.shards) for d in make_shard(s, args.docs, args.seed)}
    twice = sorted(i for i, n in seen.items() if n > 1)
    missing = sorted(every - set(seen))
    if twice or missing or wrong_scores:
        problems.append(
            f"documents scored twice {twice[:5]}, never {missing[:5]}, wrongly {wrong_scores}"
        )
    if sorted(r["shard"] for r in results) != list(range(args.shards)):
        problems.append("map did not return one result per shard")
    accuracy = correct / total if total else 0.0
    if accuracy < 0.9:
        problems.append(f"accuracy {accuracy:.3f} is below 0.9")
    return {
        "ok": not problems,
        "problems": problems,
        "documents": len(every),
        "scored_once": len(every) - len(missing) - len(twice),
        "accuracy": round(accuracy, 4),
        "by_worker": dict(collections.Counter(r["worker"] for r in results)),
    }


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--workers", type=int, default=3, help="most members of the pool")
    parser.add_argument("--shards", type=int, default=12, help="input shards")
    parser.add_argument("--docs", type=int, default=50, help="documents per shard")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--kill-at-shard", type=int, metavar="K", help="the member that first gets shard K dies"
    )
    parser.add_argument("--storage-url", help="fsspec URL for inputs and outputs (default: temp)")
    parser.add_argument("--name", default="classify", help="actor pool name")
    parser.add_argument("--timeout", type=float, default=600, help="seconds for the whole run")
    parser.add_argument("--report", help="also write the summary as JSON here")
    args = parser.parse_args(argv)
    for flag in ("workers", "shards", "docs"):
        if getattr(args, flag) < 1:
            parser.error(f"--{flag} must be at least 1")
    if args.kill_at_shard is not None and not 0 <= args.kill_at_shard < args.shards:
        parser.error(f"--kill-at-shard must be between 0 and {args.shards - 1}")
    if args.storage_url is None:
        args.storage_url = "file://" + tempfile.mkdtemp(prefix="fray-classify-")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """Writes the shards, scores them on a pool and checks the outputs."""
    args = parse_args(argv)
    started = time.monotonic()
    input_root = _join(args.storage_url, "input")
    output_root = _join(args.storage_url, "output")
    tasks: list[dict[str, Any]] = []
    for shard in range(args.shards):
        name = f"shard-{shard:05d}"
        with _open(_join(input_root, f"{name}.jsonl"), "w") as f:
            f.writelines(json.dumps(d) + "\n" for d in make_shard(shard, args.docs, args.seed))
        marker = _join(args.storage_url, "killed") if shard == args.kill_at_shard else None
        tasks.append(
            {
                "shard": shard,
                "input": _join(input_root, f"{name}.jsonl"),
                "output": _join(output_root, f"{name}.jsonl"),
                "marker": marker,
            }
        )

    client = current_client()
    print(f"classify: backend {client.scheme}, up to {args.workers} members", flush=True)
    try:
        pool = client.create_actor_pool(
            Classifier,
            name=args.name,
            min_workers=1,
            max_workers=args.workers,
            resources=ResourceConfig(cpu=0.5, ram="512m"),
            actor_config=ActorConfig(max_restarts=0),  # a dead member is replaced by the pool
            no_members_timeout=min(args.timeout, 120.0),
        )
        with pool:
            # As each shard is done; a shard whose member died comes from another member.
            results = list(pool.map("score_shard", tasks, ordered=False))
            status = pool.status()
            if time.monotonic() - started > args.timeout:
                raise TimeoutError(f"the run took longer than --timeout {args.timeout:g}s")
    except (FrayError, TimeoutError) as exc:
        print(f"classify: FAILED: {type(exc).__name__}: {exc}", flush=True)
        return 1
    finally:
        client.shutdown()
    summary = check(args, output_root, results)
    summary.update(
        backend=client.scheme,
        shards=args.shards,
        redispatched=status.redispatched,
        members_dead=status.members_dead + status.members_restarting,
        members_started=len(status.members),
    )
    killed = 0 if args.kill_at_shard is None else 1
    gone = status.members_dead + status.members_restarting
    if (status.redispatched, gone) != (killed, killed):
        summary["problems"].append(
            f"expected {killed} dead member(s) and re-dispatch(es); got {gone} dead, "
            f"{status.redispatched} re-dispatched"
        )
        summary["ok"] = False
    if args.report:
        with _open(args.report, "w") as f:
            json.dump(summary, f, indent=2)
    if not summary["ok"]:
        print("classify: FAILED: " + "; ".join(summary["problems"]), flush=True)
        return 1
    print(
        f"classify: OK on {client.scheme}: {summary['documents']} documents in {args.shards} "
        f"shards, each scored exactly once (accuracy {summary['accuracy']:.3f}); members "
        f"{summary['by_worker']}, dead {status.members_dead}, re-dispatched {status.redispatched}",
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
