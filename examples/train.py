"""A small JAX training run submitted as a Fray job, with checkpoints written through fsspec.

The job trains a two-layer MLP (Adam, written out in plain JAX) to fit a smooth 2-D function on
data the job generates from a seed, prints its loss as it falls, and saves a checkpoint every
``--checkpoint-every`` steps to ``--checkpoint-url`` (any fsspec URL every worker can reach: a
local folder on one machine, ``gs://...`` on a cluster). A run that finds checkpoints there
resumes from the newest one, so a preempted and re-run job loses at most one interval of work.

With ``--tpu TYPE --slices N`` the job is a TPU gang: one replica per TPU VM of every slice.
Each host runs the same program (on a real slice it would call ``jax.distributed`` and share
the batch; the example keeps the hosts independent so it also runs on CPU-only test clusters);
host 0 of slice 0 writes the checkpoints and every host reports the TPU and ``MEGASCALE_*``
environment it ran with. The driver checks those reports, the falling loss and the checkpoint
files, prints one final line, and exits 1 if any check fails.

    python examples/train.py --steps 300
    FRAY_CLIENT_SPEC=ray python examples/train.py --tpu v4-16 --slices 2
"""

from __future__ import annotations

import argparse
import io
import json
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from typing import Any

from fray import Entrypoint, JobRequest, ResourceConfig, current_client
from fray.errors import FrayError

# What a host reports about where it ran (the env a TPU VM and a multislice gang get).
HOST_ENV_KEYS = (
    "TPU_NAME",
    "TPU_WORKER_ID",
    "TPU_ACCELERATOR_TYPE",
    "MEGASCALE_COORDINATOR_ADDRESS",
    "MEGASCALE_NUM_SLICES",
    "MEGASCALE_SLICE_ID",
    "MEGASCALE_PORT",
    "FRAY_JOB_ID",
    "FRAY_TASK_INDEX",
    "FRAY_NUM_TASKS",
    "JAX_PLATFORMS",
)


# ---------------------------------------------------------------------------------------------
# Storage helpers (fsspec; every backend's workers and the driver can reach the URL)


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


def list_checkpoints(url: str) -> list[tuple[int, str]]:
    """(step, URL) of every checkpoint under ``url``, oldest first."""
    import fsspec

    fs, root = fsspec.core.url_to_fs(url)
    if not fs.exists(root):
        return []
    found: list[tuple[int, str]] = []
    for path in fs.ls(root, detail=False):
        name = path.rstrip("/").rsplit("/", 1)[-1]
        if name.startswith("step-") and name.endswith(".npz"):
            found.append((int(name[len("step-") : -len(".npz")]), _join(url, name)))
    return sorted(found)


def save_checkpoint(url: str, step: int, state: dict[str, Any]) -> str:
    """Writes ``state`` (a flat dict of arrays) as ``step-NNNNNN.npz``; atomic per file."""
    import fsspec
    import numpy as np

    buffer = io.BytesIO()
    arrays = {"step": np.asarray(step), **{k: np.asarray(v) for k, v in state.items()}}
    savez: Any = np.savez  # its stubs would bind an array named "allow_pickle" to that flag
    savez(buffer, **arrays)
    target = _join(url, f"step-{step:06d}.npz")
    fs, path = fsspec.core.url_to_fs(target)
    fs.makedirs(path.rsplit("/", 1)[0], exist_ok=True)
    # Write to a temporary name and move it into place: a reader never sees half a file.
    partial = f"{path}.partial-{os.getpid()}"
    with fs.open(partial, "wb") as f:
        f.write(buffer.getvalue())
    fs.mv(partial, path)
    return target


def load_checkpoint(url: str) -> tuple[int, dict[str, Any]]:
    """(step, state) of one checkpoint file."""
    import numpy as np

    with _open(url, "rb") as f:
        data = np.load(io.BytesIO(f.read()))
        state = {k: data[k] for k in data.files if k != "step"}
        return int(data["step"]), state


# ---------------------------------------------------------------------------------------------
# The training job (module level: workers unpickle it)


def _target(x: Any) -> Any:
    import jax.numpy as jnp

    return jnp.sin(3.0 * x[:, 0]) * jnp.cos(2.0 * x[:, 1]) + 0.5 * x[:, 0] * x[:, 1]


def train_host(config: dict[str, Any]) -> dict[str, Any]:
    """Trains on this host and returns its report (losses, checkpoints, environment).

    ``config`` keys: steps, batch_size, hidden, learning_rate, seed, checkpoint_url,
    checkpoint_every, log_every.
    """
    ckpt_url = str(config["checkpoint_url"])
    # Where to resume from, before anything expensive: a bad URL fails at once.
    existing = list_checkpoints(ckpt_url)

    import jax
    import jax.numpy as jnp

    env = {key: os.environ.get(key) for key in HOST_ENV_KEYS}
    slice_id = int(env["MEGASCALE_SLICE_ID"] or 0)
    worker_id = int(env["TPU_WORKER_ID"] or 0)
    task_index = int(env["FRAY_TASK_INDEX"] or 0)
    if env["TPU_NAME"]:  # one replica per TPU VM; host 0 of slice 0 writes the checkpoints
        leader = slice_id == 0 and worker_id == 0
        tag = f"[slice {slice_id} host {worker_id}]"
    else:
        leader = task_index == 0
        tag = f"[replica {task_index}]"
    steps = int(config["steps"])
    hidden = int(config["hidden"])
    lr = float(config["learning_rate"])
    batch = int(config["batch_size"])

    names = ("w1", "b1", "w2", "b2", "w3", "b3")
    shapes = {
        "w1": (2, hidden),
        "b1": (hidden,),
        "w2": (hidden, hidden),
        "b2": (hidden,),
        "w3": (hidden, 1),
        "b3": (1,),
    }

    def init(key: Any) -> dict[str, Any]:
        keys = jax.random.split(key, len(names))
        params = {}
        for name, k in zip(names, keys, strict=True):
            shape = shapes[name]
            if name.startswith("w"):
                params[name] = jax.random.normal(k, shape) * jnp.sqrt(2.0 / shape[0])
            else:
                params[name] = jnp.zeros(shape)
        return params

    def predict(params: dict[str, Any], x: Any) -> Any:
        h = jax.nn.gelu(x @ params["w1"] + params["b1"])
        h = jax.nn.gelu(h @ params["w2"] + params["b2"])
        return (h @ params["w3"] + params["b3"])[:, 0]

    def loss_fn(params: dict[str, Any], x: Any, y: Any) -> Any:
        return jnp.mean((predict(params, x) - y) ** 2)

    @jax.jit
    def update(params: Any, m: Any, v: Any, t: Any, key: Any) -> Any:
        x = jax.random.uniform(key, (batch, 2), minval=-1.5, maxval=1.5)
        y = _target(x)
        loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
        b1, b2, eps = 0.9, 0.999, 1e-8
        m = jax.tree_util.tree_map(lambda a, g: b1 * a + (1 - b1) * g, m, grads)
        v = jax.tree_util.tree_map(lambda a, g: b2 * a + (1 - b2) * g * g, v, grads)
        scale = lr * jnp.sqrt(1 - b2**t) / (1 - b1**t)
        params = jax.tree_util.tree_map(
            lambda p, a, b: p - scale * a / (jnp.sqrt(b) + eps), params, m, v
        )
        return params, m, v, loss

    # Every host draws its own data (on a real gang each would own a shard of the batch).
    data_key = jax.random.fold_in(
        jax.random.PRNGKey(int(config["seed"])), 1000 * slice_id + worker_id
    )
    params = init(jax.random.PRNGKey(int(config["seed"])))
    m = jax.tree_util.tree_map(jnp.zeros_like, params)
    v = jax.tree_util.tree_map(jnp.zeros_like, params)
    start = 0
    if existing:
        start, state = load_checkpoint(existing[-1][1])
        params = {n: jnp.asarray(state[f"params.{n}"]) for n in names}
        m = {n: jnp.asarray(state[f"m.{n}"]) for n in names}
        v = {n: jnp.asarray(state[f"v.{n}"]) for n in names}
        print(f"{tag} resuming from {existing[-1][1]} (step {start})", flush=True)

    eval_x = jax.random.uniform(jax.random.PRNGKey(7), (1024, 2), minval=-1.5, maxval=1.5)
    eval_y = _target(eval_x)
    eval_loss = jax.jit(loss_fn)
    first_eval = float(eval_loss(params, eval_x, eval_y))
    print(f"{tag} step {start:4d}  eval loss {first_eval:.4f}", flush=True)
    losses: list[tuple[int, float]] = []
    written: list[str] = []
    began = time.monotonic()
    for step in range(start + 1, steps + 1):
        params, m, v, loss = update(params, m, v, step, jax.random.fold_in(data_key, step))
        if step % int(config["log_every"]) == 0 or step == steps:
            losses.append((step, float(loss)))
            print(f"{tag} step {step:4d}  train loss {float(loss):.4f}", flush=True)
        if leader and (step % int(config["checkpoint_every"]) == 0 or step == steps):
            state = {f"params.{n}": params[n] for n in names}
            state |= {f"m.{n}": m[n] for n in names}
            state |= {f"v.{n}": v[n] for n in names}
            written.append(save_checkpoint(ckpt_url, step, state))
            print(f"{tag} checkpoint {written[-1]}", flush=True)
    last_eval = float(eval_loss(params, eval_x, eval_y))
    print(f"{tag} step {steps:4d}  eval loss {last_eval:.4f}", flush=True)
    return {
        "env": env,
        "pid": os.getpid(),
        "leader": leader,
        "start_step": start,
        "steps": steps,
        "eval_loss_first": first_eval,
        "eval_loss_last": last_eval,
        "train_losses": losses,
        "checkpoints": written,
        "seconds": time.monotonic() - began,
        "devices": [str(d) for d in jax.devices()],
    }


# ---------------------------------------------------------------------------------------------
# The driver


def _host_name(env: dict[str, Any]) -> str:
    if env.get("TPU_NAME"):
        return f"{env['TPU_NAME']}/{env['TPU_WORKER_ID']}"
    return f"replica {env.get('FRAY_TASK_INDEX') or 0}"


def check(
    reports: list[dict[str, Any]], args: argparse.Namespace, replicas: int
) -> tuple[list[str], dict[str, Any]]:
    """The driver's checks; returns (problems, summary)."""
    problems: list[str] = []
    if len(reports) != replicas:
        problems.append(f"expected {replicas} host reports, got {len(reports)}")
    for report in reports:
        first, last = report["eval_loss_first"], report["eval_loss_last"]
        if report["start_step"] == 0 and not last < 0.5 * first:
            problems.append(f"loss did not fall enough on {report['env']}: {first} -> {last}")
    leaders = [r for r in reports if r["leader"]]
    if len(leaders) != 1:
        problems.append(f"expected exactly one checkpoint writer, got {len(leaders)}")
    stored = list_checkpoints(args.checkpoint_url)
    if not stored or stored[-1][0] != args.steps:
        problems.append(f"no checkpoint of step {args.steps} at {args.checkpoint_url}: {stored}")
    else:
        step, state = load_checkpoint(stored[-1][1])
        if step != args.steps or "params.w1" not in state:
            problems.append(f"checkpoint {stored[-1][1]} is not readable as step {args.steps}")
    hosts = sorted((r["env"]["TPU_NAME"] or "", r["env"]["TPU_WORKER_ID"] or "") for r in reports)
    if args.tpu:
        if len(set(hosts)) != len(hosts):
            problems.append(f"two replicas ran as the same TPU host: {hosts}")
        if args.slices > 1:
            ids = [r["env"]["MEGASCALE_SLICE_ID"] for r in reports]
            expected = sorted(
                str(i) for i in range(args.slices) for _ in range(replicas // args.slices)
            )
            if sorted(i or "" for i in ids) != expected:
                problems.append(f"MEGASCALE_SLICE_ID per host is {ids}; expected {expected}")
            counts = {r["env"]["MEGASCALE_NUM_SLICES"] for r in reports}
            if counts != {str(args.slices)}:
                problems.append(f"MEGASCALE_NUM_SLICES is {counts}; expected {args.slices}")
            coordinators = {r["env"]["MEGASCALE_COORDINATOR_ADDRESS"] for r in reports}
            if len(coordinators) != 1 or None in coordinators:
                problems.append(f"hosts disagree on the coordinator: {coordinators}")
    summary = {
        "ok": not problems,
        "replicas": replicas,
        "hosts": [r["env"] for r in reports],
        "eval_loss_first": [r["eval_loss_first"] for r in reports],
        "eval_loss_last": [r["eval_loss_last"] for r in reports],
        "start_steps": [r["start_step"] for r in reports],
        "checkpoints": [url for _, url in stored],
        "problems": problems,
    }
    return problems, summary


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--steps", type=int, default=300, help="training steps (default 300)")
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--hidden", type=int, default=64, help="MLP width")
    parser.add_argument("--learning-rate", type=float, default=3e-3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--checkpoint-url",
        help="fsspec URL for checkpoints (default: a new temporary folder)",
    )
    parser.add_argument("--checkpoint-every", type=int, default=100)
    parser.add_argument("--log-every", type=int, default=50)
    parser.add_argument("--tpu", metavar="TYPE", help="run as a TPU gang of this slice type")
    parser.add_argument("--slices", type=int, default=1, help="TPU slices (with --tpu)")
    parser.add_argument("--name", default="train", help="job name")
    parser.add_argument("--timeout", type=float, default=900, help="seconds to wait for the job")
    parser.add_argument("--report", help="also write the summary as JSON to this path or URL")
    args = parser.parse_args(argv)
    for flag in ("steps", "batch_size", "hidden", "checkpoint_every", "log_every", "slices"):
        if getattr(args, flag) < 1:
            parser.error(f"--{flag.replace('_', '-')} must be at least 1")
    if args.slices > 1 and not args.tpu:
        parser.error("--slices needs --tpu TYPE")
    if args.checkpoint_url is None:
        args.checkpoint_url = "file://" + os.path.join(
            tempfile.mkdtemp(prefix="fray-train-"), "checkpoints"
        )
    return args


def write_report(target: str | None, summary: dict[str, Any]) -> None:
    """Writes the summary as JSON through fsspec (a plain path works too)."""
    if target:
        with _open(target, "w") as f:
            json.dump(summary, f, indent=2)


def main(argv: Sequence[str] | None = None) -> int:
    """Submits the training job, waits for it and checks what it produced."""
    args = parse_args(argv)
    if args.tpu:
        resources = ResourceConfig.with_tpu(args.tpu, slice_count=args.slices)
    else:
        resources = ResourceConfig(cpu=1, ram="2g")
    config = {
        "steps": args.steps,
        "batch_size": args.batch_size,
        "hidden": args.hidden,
        "learning_rate": args.learning_rate,
        "seed": args.seed,
        "checkpoint_url": args.checkpoint_url,
        "checkpoint_every": args.checkpoint_every,
        "log_every": args.log_every,
    }
    client = current_client()
    try:
        request = JobRequest(
            name=args.name,
            entrypoint=Entrypoint.from_callable(train_host, args=(config,)),
            resources=resources,
            max_retries_failure=0,
            max_retries_preemption=3,
        )
        print(
            f"train: backend {client.scheme}, {request.replica_count} replica(s) "
            f"({args.tpu or 'cpu'} x {args.slices}), checkpoints at {args.checkpoint_url}",
            flush=True,
        )
        job = client.submit(request)
        print(f"train: submitted {job.job_id}", flush=True)
        result = job.result(timeout=args.timeout)
        reports = result if isinstance(result, list) else [result]
        for report in reports:
            curve = ", ".join(f"{step}: {loss:.4f}" for step, loss in report["train_losses"])
            print(f"train: host {_host_name(report['env'])} train loss by step: {curve}")
        problems, summary = check(reports, args, request.replica_count)
    except (FrayError, TimeoutError) as exc:
        # A job failed or timed out, or the backend gave up: say so on the final line.
        print(f"train: FAILED: {type(exc).__name__}: {exc}", flush=True)
        return 1
    finally:
        client.shutdown()
    summary["backend"] = client.scheme
    write_report(args.report, summary)
    if problems:
        print("train: FAILED: " + "; ".join(problems), flush=True)
        return 1
    first = max(summary["eval_loss_first"])
    last = max(summary["eval_loss_last"])
    print(
        f"train: OK on {client.scheme}: eval loss {first:.4f} -> {last:.4f} over "
        f"{args.steps} steps on {len(reports)} host(s), {len(summary['checkpoints'])} "
        f"checkpoint(s) at {args.checkpoint_url}",
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
