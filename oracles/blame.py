"""Blame across targets: which component a failure belongs to, decided from
every target's outcome for the same sample, so that one bug seen on many
targets is one bucket, and bugs of different components never share one.

The rules (pure functions over what the engine observed; no engine imports):

- An error belongs to the owner of the stage that failed (``Observation.owner``:
  ``torch.export``, ``torch-mlir:<output type>``, an IREE backend).
  torch-mlir lowers every output type through its torch backend contract (the
  ``torch`` output type is exactly that shared prefix): a lowering failure the
  ``torch`` output type shows too, with the same op and normalized line, in the
  same sample, is the prefix's (``torch-mlir:torch``), not one bug per output type.
  One exception: a target whose compiler runs a shared lowering inside itself
  (IREE's torch input runs torch-mlir's TorchToLinalg) and fails with the same
  op and normalized error line as that lowering failed with, in the same
  sample, is the same bug: it joins the lowering's verdict and owner.
- IREE shares its compiler front and middle (input conversion, Flow, Stream)
  and its runtime (VM, HAL) across backends: a compile (or run) failure with
  the same op and normalized line on two or more IREE backends (or input
  paths) of the same sample is that shared part's (``iree:compiler``,
  ``iree:runtime``), not one bug per backend. On one backend only it stays
  the backend's.
- A wrong answer shared by targets with different backends that consumed the
  same lowering (same ``lowering_owner``), with the same culprit and the same
  wrong numbers, is the lowering's (``torch-mlir:linalg-on-tensors`` when
  refbackend and IREE agree). A wrong answer on one backend only is that
  backend's. Different wrong numbers are different bugs, even on one lowering.

Across roads (README "Roads into IREE"), with each target's ``upstream``: the
frontend that made what its lowering consumed (``torch.onnx`` for the ONNX
targets, ``torch.onnx[loop-free]`` for their loop-free bag variant,
``iree-turbine`` for turbine's), None on the FX road:

- A wrong answer computed alike by an executor of the exported file itself
  (onnxruntime: its ``lowering_owner`` is its ``upstream``) and by a target
  that lowered that file (the ONNX targets of IREE or torch-mlir) is the
  exporter's (``torch.onnx``): two independent executors agreeing on a wrong
  number read it from the file. onnxruntime right and the ONNX targets wrong
  alike falls to the rule above: ``torch-mlir:onnx``, their shared lowering.
  A loop-free variant's findings name the variant (``torch.onnx[loop-free]``),
  never the exporter of the model as written.
- A wrong answer only a frontend's own targets compute (``FRONTEND_ALONE``:
  iree-turbine, whose program IREE's torch input compiles as it compiles
  ``iree-torch``'s) is that frontend's: the FX road, same backend, got it
  right or computed other numbers.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from oracles.normalize import normalize_error
from oracles.results import Stage
from oracles.signature import bucket_for, error_key, mismatch_key
from oracles.verdict import Outcome, Verdict

__all__ = ["Observation", "Blamed", "blame", "same_wrong_answer", "TORCH_PREFIX",
           "IREE_SHARED", "FRONTEND_ALONE"]

# The owners of IREE's backend-independent parts, by the stage that failed.
IREE_SHARED = {Stage.COMPILE: "iree:compiler", Stage.RUN: "iree:runtime"}

# The owner of torch-mlir's shared lowering prefix (FX import + torch backend contract).
TORCH_PREFIX = "torch-mlir:torch"

# Frontends whose targets' wrong answers, seen on no other road, are their own.
FRONTEND_ALONE = frozenset({"iree-turbine"})


@dataclass(frozen=True)
class Observation:
    """One target's failing outcome for a sample, with the facts blame needs."""

    outcome: Outcome
    owner: str  # who owns the failing stage when this target is seen alone
    lowering_owner: str  # who lowered the program this target's backend consumed
    culprit: str | None = None  # MISMATCH only: what localization named
    cluster: int = 0  # MISMATCH only: targets with the same wrong numbers share it
    upstream: str | None = None  # the frontend before the lowering (None: the FX road)


@dataclass(frozen=True)
class Blamed:
    """Where an observation is filed: the verdict and owner of its bug, its key and bucket."""

    target: str
    verdict: Verdict
    owner: str
    key: str
    bucket: str


def same_wrong_answer(a: list[np.ndarray | None], b: list[np.ndarray | None],
                      rtol: float = 1e-4, atol: float = 1e-5) -> bool:
    """Two targets' outputs agree on every batch both produced: the same wrong
    answer, i.e. (for blame) the same bug computed twice."""
    compared = False
    for x, y in zip(a, b):
        if x is None or y is None:
            continue
        if x.shape != y.shape or not np.allclose(x, y, rtol=rtol, atol=atol, equal_nan=True):
            return False
        compared = True
    return compared


def _iree_site(o: Observation) -> tuple[Stage, str | None, str]:
    return Stage.parse(str(o.outcome.stage)), o.outcome.op, normalize_error(o.outcome.error)


def blame(observations: list[Observation]) -> list[Blamed]:
    """One ``Blamed`` per observation, in order."""
    lowering_errors = {
        (o.owner, o.outcome.op, normalize_error(o.outcome.error)): o
        for o in observations if o.outcome.stage == Stage.IMPORT
        and o.outcome.verdict is not Verdict.MISMATCH
    }
    backends_per_cluster: dict[tuple[str, str | None, int], set[str]] = {}
    for o in observations:
        if o.outcome.verdict is Verdict.MISMATCH:
            backends_per_cluster.setdefault((o.lowering_owner, o.culprit, o.cluster),
                                            set()).add(o.owner)
    iree_owners: dict[tuple[Stage, str | None, str], set[str]] = {}
    for o in observations:
        if o.owner.startswith("iree:") and o.outcome.stage in IREE_SHARED \
                and o.outcome.verdict is not Verdict.MISMATCH:
            iree_owners.setdefault(_iree_site(o), set()).add(o.owner)
    across_roads = _road_owners(observations)
    blamed = []
    for o in observations:
        verdict, owner = o.outcome.verdict, o.owner
        if o.outcome.stage == Stage.IMPORT and (TORCH_PREFIX, o.outcome.op,
                                                normalize_error(o.outcome.error)) in lowering_errors:
            owner = TORCH_PREFIX
        if verdict is Verdict.MISMATCH:
            if (o.culprit, o.cluster) in across_roads:
                owner = across_roads[(o.culprit, o.cluster)]
            elif len(backends_per_cluster[(o.lowering_owner, o.culprit, o.cluster)]) > 1:
                owner = o.lowering_owner
            key = mismatch_key(owner, o.culprit or "unlocalized")
        else:
            shared = lowering_errors.get(
                (o.lowering_owner, o.outcome.op, normalize_error(o.outcome.error)))
            if shared is not None and o.outcome.stage != Stage.IMPORT \
                    and o.lowering_owner != o.owner:
                verdict, owner = shared.outcome.verdict, shared.owner
                if (TORCH_PREFIX, shared.outcome.op,
                        normalize_error(shared.outcome.error)) in lowering_errors:
                    owner = TORCH_PREFIX
            elif len(iree_owners.get(_iree_site(o), ())) > 1:
                owner = IREE_SHARED[Stage(o.outcome.stage)]
            key = error_key(verdict, owner, o.outcome.op, o.outcome.error)
        blamed.append(Blamed(o.outcome.target, verdict, owner, key, bucket_for(verdict, key)))
    return blamed


def _road_owners(observations: list[Observation]) -> dict[tuple[str | None, int], str]:
    """The wrong-answer clusters blamed on a frontend: (culprit, cluster) -> owner."""
    members: dict[tuple[str | None, int], list[Observation]] = {}
    for o in observations:
        if o.outcome.verdict is Verdict.MISMATCH:
            members.setdefault((o.culprit, o.cluster), []).append(o)
    owners: dict[tuple[str | None, int], str] = {}
    for cluster, seen in members.items():
        upstreams = {o.upstream for o in seen}
        if len(upstreams) != 1 or None in upstreams:
            continue  # the FX road among them, or two frontends: the rules above
        upstream = seen[0].upstream
        assert upstream is not None
        runs_the_file = any(o.lowering_owner == upstream for o in seen)
        lowered_it = any(o.lowering_owner != upstream for o in seen)
        if (runs_the_file and lowered_it) or upstream in FRONTEND_ALONE:
            owners[cluster] = upstream
    return owners
