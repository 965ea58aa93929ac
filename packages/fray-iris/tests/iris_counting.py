"""What the tests and the scale benchmark (``benchmarks/bench_scale_iris.py``) that count
controller calls rather than time need.

``CountingIris(raw)`` stands in for an ``iris.client.IrisClient``: every method called on it,
or on the objects it holds (its inner controller client, where an adapter reaches it), is
logged by name, with the calling thread and how many job ids it carried, then passed on.
:func:`register_endpoints` registers actor endpoints through the controller's own RPC, as the
actors' tasks would, without a process behind them.
"""

from __future__ import annotations

import threading
import time
from typing import Any, NamedTuple

from iris.rpc import controller_connect, controller_pb2

# Attribute values passed through as they are (not wrapped): plain data.
_PLAIN = (str, bytes, int, float, bool, type(None), tuple, list, dict)


class Call(NamedTuple):
    """One call made through a :class:`CountingIris`."""

    name: str
    thread: int
    ids: int  # job ids in its first argument, where that is a list (0 otherwise)
    at: float  # when it was made (``time.time()``)


class CountingIris:
    """Counts the calls made through ``target`` (an Iris client, or an object it holds)."""

    def __init__(self, target: Any, log: list[Call] | None = None) -> None:
        self._target = target
        self.log: list[Call] = [] if log is None else log

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._target, name)
        if callable(value):

            def counted(*args: Any, **kwargs: Any) -> Any:
                ids = len(args[0]) if args and isinstance(args[0], list) else 0
                self.log.append(Call(name, threading.get_ident(), ids, time.time()))
                return value(*args, **kwargs)

            return counted
        if name.startswith("_") and not name.startswith("__") and not isinstance(value, _PLAIN):
            return CountingIris(value, self.log)  # the client's inner controller client
        return value

    def calls(self, thread: int | None = None) -> list[Call]:
        """The calls so far (made from ``thread`` only, where given)."""
        return [call for call in list(self.log) if thread is None or call.thread == thread]

    def clear(self) -> None:
        """Forgets the calls so far."""
        self.log.clear()


def register_endpoints(url: str, wire: str, group: str, indices: range) -> None:
    """Registers the endpoints of the members ``indices`` of the actor group ``group`` (its
    job ``wire``) through the controller's ``RegisterEndpoint`` RPC, as their tasks would,
    with no process serving them (their tasks still wait to be placed)."""
    # marin-iris 0.2.227 moved the endpoint calls to a service of their own.
    stub_type = getattr(
        controller_connect,
        "EndpointServiceClientSync",
        controller_connect.ControllerServiceClientSync,
    )
    with stub_type(address=url, timeout_ms=30_000) as stub:
        for index in indices:
            stub.register_endpoint(
                controller_pb2.Controller.RegisterEndpointRequest(
                    name=f"{wire}/{group}-{index}",
                    address="http://127.0.0.1:9",  # never called
                    task_id=f"{wire}/{index}",
                    attempt_id=-1,  # a task not yet placed has no attempt
                    metadata={"fray": "stand-in"},
                )
            )
