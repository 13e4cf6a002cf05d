"""The Ray cluster as the Ray pool (``fuzz.workers.raypool``) meets it:
importing Ray (lazily: the base install has none, ``pip install
'dlrm-fuzz[ray]'``), connecting to a cluster without letting Ray take over the
process's SIGTERM, checking the cluster has room for the actors asked for,
and turning what Ray raises into one-line errors (``RayUnavailable``,
``ClusterLost``). Apart from the pool so that the pool reads as dispatch
only: which actor runs which job, and what happens when one is lost.
"""

from __future__ import annotations

import logging
import os
import re
import signal
import socket
import threading
from typing import Any, Callable

from fuzz.workers.interface import HarnessError

__all__ = ["RayUnavailable", "ClusterLost", "ray_module", "connect", "check_room", "unwrapped",
           "first_line", "last_line"]

_INSTALL_HINT = "pip install 'dlrm-fuzz[ray]'"


class RayUnavailable(RuntimeError):
    """Ray is missing, its cluster unreachable or too small for the pool asked for."""


class ClusterLost(HarnessError):
    """The cluster lost what a job needs: the job lost ``MAX_ATTEMPTS`` actors,
    or no node is left to start one on. Not a finding, and not a bug of
    dlrm-fuzz either (a ``HarnessError`` so that it stops a campaign the same way)."""


def ray_module() -> Any:
    """The ``ray`` module, or ``RayUnavailable`` naming the extra that installs it."""
    try:
        import ray
    except ImportError as exc:
        raise RayUnavailable(f"Ray is not installed ({exc}): {_INSTALL_HINT}") from None
    return ray


def connect(ray: Any, address: str, cpus: int) -> bool:
    """Connect this process to the cluster at ``address`` ("local": a new
    cluster of ``cpus`` CPUs in this process), keeping the process's own
    SIGTERM handler; True when this call connected (the caller then
    disconnects), False when the process already was."""
    if ray.is_initialized():
        return False
    # Worker logs stay on their nodes (the campaign prints its own report).
    quiet: dict[str, Any] = dict(log_to_driver=False, logging_level=logging.ERROR)
    # ray.init installs a SIGTERM handler that exits the process: the
    # campaign's own (stop, report, reap) must stay in charge.
    sigterm = signal.getsignal(signal.SIGTERM)
    try:
        if address == "local":
            # "local": always a new cluster, never one another process started.
            ray.init(address="local", num_cpus=cpus, include_dashboard=False, **quiet)
        else:
            _probe(address)
            ray.init(address=address, **quiet)
    except Exception as exc:
        # Port open, no connection: most often Ray 2.60's token authentication,
        # which an explicit address does not switch on by itself.
        token = "" if isinstance(exc, _Unreachable) or os.environ.get("RAY_AUTH_MODE") else (
            "; if the cluster uses token authentication, set RAY_AUTH_MODE=token and copy "
            "the head's ~/.ray/auth_token here")
        raise RayUnavailable(
            f"address={address!r}: no Ray cluster reachable ({first_line(exc)}); start "
            f"one with `ray start --head` there and check it with `ray status --address "
            f"HOST:6379`{token}; or use --ray local") from None
    finally:
        if threading.current_thread() is threading.main_thread() and sigterm is not None:
            signal.signal(signal.SIGTERM, sigterm)
    return True


def check_room(ray: Any, address: str, size: int, gpu_workers: int) -> None:
    """A one-line error when the cluster has too few CPUs or GPUs for
    ``size`` CPU actors and ``gpu_workers`` GPU actors, naming the fix."""
    total = ray.cluster_resources()
    cpus, gpus = int(total.get("CPU", 0)), int(total.get("GPU", 0))
    if gpu_workers > gpus:
        raise RayUnavailable(f"gpu_workers={gpu_workers}: the Ray cluster at {address} "
                             f"has {gpus} GPUs; join GPU nodes with `ray start "
                             f"--address=HEAD:6379 --num-gpus N`")
    if size + gpu_workers > cpus:
        raise RayUnavailable(f"workers={size} + gpu_workers={gpu_workers} need "
                             f"{size + gpu_workers} CPUs; the Ray cluster at "
                             f"{address} has {cpus}: add nodes or ask for fewer workers")


def unwrapped(call: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``call`` (a blocking Ray call), raising what a signal handler raised
    during it (the campaign's ``Interrupted``) as itself: Ray hands it back
    wrapped in a ``SystemError``, which would read as a crash of ours."""
    try:
        return call(*args, **kwargs)
    except SystemError as exc:
        cause = exc.__cause__ or exc.__context__
        if cause is None or isinstance(cause, Exception):
            raise
        raise cause.with_traceback(cause.__traceback__) from None


class _Unreachable(ConnectionError):
    """Nobody listens at the address."""


def _probe(address: str, timeout_s: float = 5.0) -> None:
    """Fail fast on a HOST:PORT nobody listens on: ``ray.init`` would retry for
    minutes. ("auto" and ``ray://`` addresses are Ray's to resolve.)"""
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit() or "://" in address:
        return
    try:
        socket.create_connection((host, int(port)), timeout=timeout_s).close()
    except OSError as exc:
        raise _Unreachable(f"cannot connect to {address}: {exc}") from None


def last_line(exc: BaseException) -> str:
    """The innermost error of a Ray error that carries a remote traceback
    (an actor's failed start): its last line, without terminal colours."""
    lines = [line for line in re.sub(r"\x1b\[[0-9;]*m", "", str(exc)).splitlines() if line.strip()]
    return lines[-1].strip() if lines else type(exc).__name__


def first_line(exc: BaseException) -> str:
    """An error's first line, for messages that must stay one line."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
