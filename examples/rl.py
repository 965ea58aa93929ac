"""An RL loop on Fray: coordinator actors, one trainer job and N rollout jobs.

The controller (this script) creates two actors with ``preemptible=False`` (they hold the
loop's state, so they must not be preempted): a ``Curriculum`` that hands out lessons and
collects rollout statistics, and a ``WeightCoordinator`` that knows the newest published
weights. It passes their handles to one trainer job and ``--rollouts`` rollout jobs and waits
for all of them with ``wait_all``.

The task is a multi-armed bandit. Rollouts pull a lesson (a seed and a difficulty: harder
lessons add more reward noise), play it with the newest policy, write the episodes to storage
and push their statistics to the curriculum. The trainer reads new episode batches from
storage, takes a policy-gradient step, writes the new weights to storage and publishes the
version; rollouts load each version they observe. Data moves through fsspec URLs; the actors
only carry small metadata. The controller checks the final statistics (every lesson reported
exactly once, every rollout observed several weight versions, the policy improved), prints one
final line and exits 1 if a check fails.

    python examples/rl.py --rollouts 3 --versions 8
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from typing import Any

from fray import ActorConfig, Entrypoint, JobRequest, ResourceConfig, current_client, wait_all
from fray.errors import FrayError

# The bandit: true mean reward of each arm. The best arm is not the first one, so a uniform
# policy scores well below what a trained one does.
ARM_MEANS = (0.2, 0.5, 0.1, 0.9, 0.3)
LONG_POLL_S = 5.0  # the longest a wait inside an actor call lasts before it is renewed


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


def _write_json(url: str, value: Any) -> None:
    import fsspec

    fs, path = fsspec.core.url_to_fs(url)
    fs.makedirs(path.rsplit("/", 1)[0], exist_ok=True)
    partial = f"{path}.partial-{os.getpid()}"
    with fs.open(partial, "w") as f:
        json.dump(value, f)
    fs.mv(partial, path)  # readers never see half a file


def _read_json(url: str) -> Any:

    with _open(url, "r") as f:
        return json.load(f)


def softmax(logits: Sequence[float]) -> list[float]:
    top = max(logits)
    exps = [math.exp(x - top) for x in logits]
    total = sum(exps)
    return [e / total for e in exps]


def expected_reward(logits: Sequence[float]) -> float:
    """The policy's mean reward on a noise-free lesson."""
    return sum(p * m for p, m in zip(softmax(logits), ARM_MEANS, strict=True))


# ---------------------------------------------------------------------------------------------
# Coordinator actors (module level: workers unpickle them)


class Curriculum:
    """Hands out lessons, raises their difficulty as rewards improve, collects statistics.

    Runs with ``max_concurrency > 1`` so that the trainer can wait for batches inside a call
    (a long poll) while rollouts keep reporting; a condition variable guards the state.
    """

    def __init__(self, promote_at: float, max_level: int) -> None:
        self.promote_at = promote_at
        self.max_level = max_level
        self.level = 0
        self.issued: dict[int, dict[str, Any]] = {}
        self.reports: list[dict[str, Any]] = []
        self.duplicates: list[int] = []
        self.unknown: list[int] = []
        self.changed = threading.Condition()

    def next_lesson(self, rollout: int) -> dict[str, Any]:
        with self.changed:
            lesson_id = len(self.issued)
            lesson = {"id": lesson_id, "level": self.level, "seed": 1000 + lesson_id}
            self.issued[lesson_id] = {**lesson, "rollout": rollout}
            return lesson

    def report(self, stats: dict[str, Any]) -> int:
        """Records one rollout's statistics; returns how many reports there are."""
        with self.changed:
            lesson = stats["lesson"]
            if lesson not in self.issued:
                self.unknown.append(lesson)
            elif any(r["lesson"] == lesson for r in self.reports):
                self.duplicates.append(lesson)
            self.reports.append(stats)
            recent = [r["mean_reward"] for r in self.reports[-6:] if r["level"] == self.level]
            if len(recent) >= 3 and sum(recent) / len(recent) > self.promote_at:
                self.level = min(self.level + 1, self.max_level)
            self.changed.notify_all()
            return len(self.reports)

    def wait_batches(self, cursor: int, count: int, timeout: float) -> tuple[list[str], int]:
        """Episode batch URLs reported after ``cursor`` and the new cursor, as soon as there
        are ``count`` of them (or what there is after ``timeout`` seconds)."""
        with self.changed:
            self.changed.wait_for(lambda: len(self.reports) - cursor >= count, timeout)
            return [r["batch_url"] for r in self.reports[cursor:]], len(self.reports)

    def summary(self) -> dict[str, Any]:
        with self.changed:
            per_rollout: dict[str, int] = {}
            for r in self.reports:
                per_rollout[str(r["rollout"])] = per_rollout.get(str(r["rollout"]), 0) + 1
            return {
                "lessons_issued": len(self.issued),
                "reports": len(self.reports),
                "reported_lessons": sorted(r["lesson"] for r in self.reports),
                "duplicates": self.duplicates,
                "unknown": self.unknown,
                "per_rollout": per_rollout,
                "level": self.level,
                "versions_used": sorted({r["version"] for r in self.reports}),
            }


class WeightCoordinator:
    """Knows the newest published weights (version and storage URL) and when the run ends.

    Rollouts wait for a newer version inside ``wait_newer`` (a long poll), so the actor runs
    with ``max_concurrency > 1``; a condition variable guards the state.
    """

    def __init__(self) -> None:
        self.version = -1
        self.url: str | None = None
        self.published: list[int] = []
        self.finished = False
        self.observed: dict[str, list[int]] = {}
        self.changed = threading.Condition()

    def publish(self, version: int, url: str, final: bool = False) -> None:
        """Makes ``version`` the newest; ``final`` also ends the run (nobody plays it)."""
        with self.changed:
            if version <= self.version:
                raise ValueError(f"version {version} is not newer than {self.version}")
            self.version, self.url = version, url
            self.published.append(version)
            self.finished = self.finished or final
            self.changed.notify_all()

    def wait_newer(
        self, rollout: int, version: int, timeout: float
    ) -> tuple[int, str | None, bool]:
        """(version, weights URL, finished) as soon as a version newer than ``version`` is
        published or the run is over, else the current state after ``timeout`` seconds."""
        with self.changed:
            self.changed.wait_for(lambda: self.version > version or self.finished, timeout)
            if self.version > version and not self.finished:
                self.observed.setdefault(str(rollout), []).append(self.version)
            return self.version, self.url, self.finished

    def finish(self) -> None:
        with self.changed:
            self.finished = True
            self.changed.notify_all()

    def summary(self) -> dict[str, Any]:
        with self.changed:
            return {"published": self.published, "observed": self.observed, "final": self.version}


# ---------------------------------------------------------------------------------------------
# Jobs


def trainer(curriculum: Any, coordinator: Any, config: dict[str, Any]) -> dict[str, Any]:
    """Publishes ``versions`` policy updates, then tells everyone the run is over.

    Each update waits for one new episode batch per rollout (each rollout plays one lesson per
    weight version), so the loop runs in step and every rollout sees every version.
    """
    deadline = time.monotonic() + float(config["job_timeout"])
    logits = [0.0] * len(ARM_MEANS)
    lr = float(config["learning_rate"])
    needed = int(config["rollouts"])
    cursor = 0
    used = 0

    def publish(version: int) -> None:
        url = _join(config["storage_url"], "weights", f"v{version:04d}.json")
        _write_json(url, {"version": version, "logits": logits})
        coordinator.publish(version, url, version == int(config["versions"]))
        print(f"trainer: published v{version}: expected reward {expected_reward(logits):.3f}")

    initial = expected_reward(logits)
    try:
        publish(0)
        for version in range(1, int(config["versions"]) + 1):
            batches: list[str] = []
            while len(batches) < needed:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"trainer waited too long for batches for v{version}")
                new, cursor = curriculum.wait_batches(cursor, needed - len(batches), LONG_POLL_S)
                batches += new
            episodes = [e for url in batches for e in _read_json(url)["episodes"]]
            used += len(batches)
            # REINFORCE with a mean baseline: grad log pi(a) = onehot(a) - pi.
            probs = softmax(logits)
            baseline = sum(e["reward"] for e in episodes) / len(episodes)
            grad = [0.0] * len(logits)
            for e in episodes:
                advantage = e["reward"] - baseline
                for arm in range(len(logits)):
                    grad[arm] += advantage * ((arm == e["arm"]) - probs[arm])
            logits = [w + lr * g / len(episodes) for w, g in zip(logits, grad, strict=True)]
            publish(version)
    finally:
        coordinator.finish()
    return {
        "versions": int(config["versions"]),
        "batches_used": used,
        "expected_reward_initial": initial,
        "expected_reward_final": expected_reward(logits),
        "logits": logits,
    }


def rollout(
    index: int, curriculum: Any, coordinator: Any, config: dict[str, Any]
) -> dict[str, Any]:
    """Plays one lesson with each new weight version until the trainer finishes."""
    deadline = time.monotonic() + float(config["job_timeout"])
    version = -1
    versions_seen: list[int] = []
    batches = 0
    while True:
        latest, url, finished = coordinator.wait_newer(index, version, LONG_POLL_S)
        if finished:
            break
        if latest == version:  # nothing new within the long poll
            if time.monotonic() > deadline:
                raise TimeoutError(f"rollout {index} waited too long for new weights")
            continue
        assert url is not None
        weights = _read_json(url)
        version, logits = weights["version"], weights["logits"]
        versions_seen.append(version)
        lesson = curriculum.next_lesson(index)
        rng = random.Random(lesson["seed"])
        probs = softmax(logits)
        noise = 0.1 * (1 + lesson["level"])
        episodes = []
        for _ in range(int(config["episodes_per_lesson"])):
            arm = rng.choices(range(len(ARM_MEANS)), weights=probs)[0]
            reward = ARM_MEANS[arm] + rng.gauss(0.0, noise)
            episodes.append({"arm": arm, "reward": reward})
        batch_url = _join(config["storage_url"], "episodes", f"lesson-{lesson['id']:05d}.json")
        _write_json(batch_url, {"lesson": lesson, "version": version, "episodes": episodes})
        mean_reward = sum(e["reward"] for e in episodes) / len(episodes)
        curriculum.report(
            {
                "lesson": lesson["id"],
                "level": lesson["level"],
                "rollout": index,
                "version": version,
                "mean_reward": mean_reward,
                "batch_url": batch_url,
            }
        )
        batches += 1
    print(f"rollout {index}: {batches} batches, saw weight versions {versions_seen}")
    return {"rollout": index, "batches": batches, "versions_seen": versions_seen}


# ---------------------------------------------------------------------------------------------
# The controller


def check(
    args: argparse.Namespace,
    trained: dict[str, Any],
    rollouts: list[dict[str, Any]],
    lessons: dict[str, Any],
    weights: dict[str, Any],
) -> list[str]:
    """The controller's checks on the final statistics."""
    problems: list[str] = []
    if weights["published"] != list(range(args.versions + 1)):
        problems.append(f"published versions {weights['published']}, expected 0..{args.versions}")
    if lessons["duplicates"] or lessons["unknown"]:
        problems.append(
            f"lessons reported twice {lessons['duplicates']} or never issued {lessons['unknown']}"
        )
    if lessons["reported_lessons"] != list(range(lessons["lessons_issued"])):
        problems.append(
            f"{lessons['lessons_issued']} lessons issued but reports cover "
            f"{lessons['reported_lessons']}"
        )
    # The loop runs in step: each rollout plays one lesson per version the trainer learns from.
    if (
        trained["batches_used"] != lessons["reports"]
        or lessons["reports"] != len(rollouts) * args.versions
    ):
        problems.append(
            f"trainer used {trained['batches_used']} of {lessons['reports']} batches; expected "
            f"{len(rollouts) * args.versions}"
        )
    for r in rollouts:
        observed = weights["observed"].get(str(r["rollout"]), [])
        if r["batches"] < 1 or lessons["per_rollout"].get(str(r["rollout"]), 0) != r["batches"]:
            problems.append(
                f"rollout {r['rollout']} made {r['batches']} batches; the curriculum has "
                f"{lessons['per_rollout'].get(str(r['rollout']), 0)}"
            )
        if r["versions_seen"] != list(range(args.versions)):
            problems.append(f"rollout {r['rollout']} saw weight versions {r['versions_seen']}")
        if not set(r["versions_seen"]) <= set(observed):
            problems.append(
                f"rollout {r['rollout']} loaded {r['versions_seen']} but asked for {observed}"
            )
    gain = trained["expected_reward_final"] - trained["expected_reward_initial"]
    if gain < 0.1:
        problems.append(
            f"the policy did not improve: expected reward {trained['expected_reward_initial']:.3f}"
            f" -> {trained['expected_reward_final']:.3f}"
        )
    return problems


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rollouts", type=int, default=3, help="rollout jobs (default 3)")
    parser.add_argument("--versions", type=int, default=8, help="weight versions to train")
    parser.add_argument("--episodes-per-lesson", type=int, default=64)
    parser.add_argument("--learning-rate", type=float, default=8.0)
    parser.add_argument("--storage-url", help="fsspec URL for weights and episodes (default: temp)")
    parser.add_argument("--name", default="rl", help="prefix of the job and actor names")
    parser.add_argument("--timeout", type=float, default=600, help="seconds for the whole loop")
    parser.add_argument("--report", help="also write the final statistics as JSON here")
    args = parser.parse_args(argv)
    for flag in ("rollouts", "versions", "episodes_per_lesson"):
        if getattr(args, flag) < 1:
            parser.error(f"--{flag.replace('_', '-')} must be at least 1")
    if args.storage_url is None:
        args.storage_url = "file://" + tempfile.mkdtemp(prefix="fray-rl-")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the loop and checks its final statistics."""
    args = parse_args(argv)
    config = {
        "versions": args.versions,
        "rollouts": args.rollouts,
        "episodes_per_lesson": args.episodes_per_lesson,
        "learning_rate": args.learning_rate,
        "storage_url": args.storage_url,
        "job_timeout": args.timeout,
    }
    client = current_client()
    print(f"rl: backend {client.scheme}, {args.rollouts} rollouts, storage {args.storage_url}")
    pinned = ResourceConfig(cpu=0, ram="256m", preemptible=False)
    # Room for every job's long poll at once, plus the controller's own calls.
    threaded = ActorConfig(max_concurrency=args.rollouts + 4)
    job_resources = ResourceConfig(cpu=0.5, ram="512m")
    try:
        curriculum = client.create_actor(
            Curriculum,
            0.6,
            3,
            name=f"{args.name}-curriculum",
            resources=pinned,
            actor_config=threaded,
        )
        coordinator = client.create_actor(
            WeightCoordinator,
            name=f"{args.name}-weights",
            resources=pinned,
            actor_config=threaded,
        )
        jobs = [
            client.submit(
                JobRequest(
                    name=f"{args.name}-trainer",
                    entrypoint=Entrypoint.from_callable(
                        trainer, args=(curriculum, coordinator, config)
                    ),
                    resources=job_resources,
                )
            )
        ]
        jobs += [
            client.submit(
                JobRequest(
                    name=f"{args.name}-rollout-{i}",
                    entrypoint=Entrypoint.from_callable(
                        rollout, args=(i, curriculum, coordinator, config)
                    ),
                    resources=job_resources,
                )
            )
            for i in range(args.rollouts)
        ]
        print(f"rl: submitted {', '.join(job.job_id for job in jobs)}", flush=True)
        statuses = wait_all(jobs, timeout=args.timeout)
        trained = jobs[0].result(timeout=60)
        rollouts = [job.result(timeout=60) for job in jobs[1:]]
        lessons = curriculum.summary()
        weights = coordinator.summary()
    except (FrayError, TimeoutError) as exc:
        # A job failed or timed out, or the backend gave up: say so on the final line.
        print(f"rl: FAILED: {type(exc).__name__}: {exc}", flush=True)
        return 1
    finally:
        client.shutdown()
    problems = check(args, trained, rollouts, lessons, weights)
    summary = {
        "ok": not problems,
        "backend": client.scheme,
        "statuses": [s.value for s in statuses],
        "trainer": trained,
        "rollouts": rollouts,
        "curriculum": lessons,
        "weights": weights,
        "problems": problems,
    }
    if args.report:
        with _open(args.report, "w") as f:
            json.dump(summary, f, indent=2)
    if problems:
        print("rl: FAILED: " + "; ".join(problems), flush=True)
        return 1
    print(
        f"rl: OK on {client.scheme}: {len(weights['published'])} weight versions, "
        f"{lessons['reports']} lessons from {len(rollouts)} rollouts (curriculum level "
        f"{lessons['level']}), expected reward {trained['expected_reward_initial']:.3f} -> "
        f"{trained['expected_reward_final']:.3f}",
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
