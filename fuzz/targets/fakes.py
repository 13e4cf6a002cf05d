"""Fake targets, named as such, that misbehave on purpose: crash, abort, hang,
blow up memory, or answer wrong on one known op. They exist only to test
the engine's own crash, timeout and localization handling.
"""

from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from fuzz.model.config import DLRMConfig
from fuzz.targets.cache import ArtifactCache
from fuzz.targets.pipeline import StageFailure, Timer
from fuzz.targets.target import EagerTarget, Target
from fuzz.targets import pipeline

__all__ = ["FakeTarget", "FakeWrongOpTarget"]


@dataclass(frozen=True)
class FakeTarget(Target):
    """FAKE, for engine tests only: misbehaves the way a broken compiler can.

    ``behaviour`` is one of segfault, abort, hang, oom, raise, ok; it acts at
    compile time, when real compilers usually die. When it survives, it
    answers like eager PyTorch, so "ok" really is a healthy target; "flaky"
    answers eager's output plus a different offset on every call.
    """

    behaviour: str = "ok"

    def compile(self, config: DLRMConfig, seed: int, example: Sequence[np.ndarray],
                timer: Timer, cache: ArtifactCache | None = None) -> Any:
        """Misbehave as ``behaviour`` says, then build the model as eager does."""
        timer.measure("compile", self._misbehave)
        return _HEALTHY.compile(config, seed, example, timer, cache)

    def _misbehave(self) -> None:
        if self.behaviour == "segfault":
            import ctypes

            ctypes.string_at(0)
        elif self.behaviour == "abort":
            os.kill(os.getpid(), signal.SIGABRT)
        elif self.behaviour == "hang":
            while True:
                time.sleep(1)
        elif self.behaviour == "oom":
            hog = []
            while True:  # grow resident memory fast: touch one byte per page
                chunk = np.empty(256 * 1024 * 1024, dtype=np.uint8)
                chunk[::4096] = 1
                hog.append(chunk)
        elif self.behaviour == "raise":
            raise StageFailure("compile", "FakeCompilerError", "fake-raise: error: deliberate failure")

    def run(self, artifact: Any, inputs: Sequence[np.ndarray], timer: Timer) -> list[np.ndarray]:
        """Eager's answer, plus fresh noise on every call when ``flaky``."""
        answer = _HEALTHY.run(artifact, inputs, timer)
        if self.behaviour == "flaky":
            # Nondeterministic on purpose (a race in a runtime, uninitialized
            # memory): a different wrong answer on every call.
            noise = 0.25 + float(np.frombuffer(os.urandom(8), np.uint64)[0] % 1000) / 1000
            return [answer[0] + np.float32(noise), *answer[1:]]
        return answer


@dataclass(frozen=True)
class FakeWrongOpTarget(Target):
    """FAKE, for engine tests only: a "compiler" with one known wrong lowering.

    It runs the exported ATen graph eagerly (torch.fx Interpreter) and adds 0.5
    to every element of each output of ``op`` (its first output, for ops with
    several). Every element, not one: a single corrupted element can be
    discarded downstream (the interaction drops the diagonal of ``bmm``), and
    then the fake would not be wrong at all. An integer ``op`` (the QR
    remainder, the quotient's cast) is off by one instead, wrapped into the
    range it produced (``_off_by_one``): a wrong index that is still a row, so
    the rest of the graph runs and the wrong answer reaches the output.
    Localization must name ``op``, never the float op that reads its result.
    """

    op: str = "aten.relu.default"
    dynamic: bool = False
    # Fails to compile int32 indices first (a known bug in front of the wrong
    # op, as int32 offsets stop the linalg lowering): tests repair-not-skip.
    refuses_int32: bool = False
    # Wrong only while nobody looks: a program with more outputs than the
    # model's one (localization's, intermediates exposed) answers right, so
    # the wrong answer vanishes under observation (the campaign holds it back).
    shy: bool = False

    @property
    def any_shape(self) -> bool:
        """Only the dynamic form accepts every batch shape, as with real compilers."""
        return self.dynamic

    def compile(self, config: DLRMConfig, seed: int, example: Sequence[np.ndarray],
                timer: Timer, cache: ArtifactCache | None = None) -> Any:
        """Export the model by the one recipe (failing on int32 first if
        asked), as a real target would."""
        from fuzz.model.recipe import recipe

        if self.refuses_int32 and config.index_dtype == "int32":
            raise StageFailure("compile", "FakeCompilerError",
                               f"{self.name}: error: int32 indices are not supported")
        return self.compile_module(*recipe(config, seed, self.dynamic, example, timer.measure),
                                   timer, cache)

    def leading_inputs(self, config: DLRMConfig, seed: int, timer: Timer) -> list[np.ndarray]:
        """The recipe's, as for a real compiled target: the program ``compile``
        exported takes ``seed``'s weights first when they are inputs."""
        from fuzz.model.recipe import leading_inputs

        return leading_inputs(config, seed, timer.measure)

    def compile_module(self, module: Any, example_args: tuple[Any, ...], dynamic_shapes: Any,
                       timer: Timer, cache: ArtifactCache | None = None) -> Any:
        """Export any module to an ATen graph that ``run`` interprets with the fault."""

        exported = timer.measure("export", lambda: pipeline.export(module, example_args, dynamic_shapes))
        return timer.measure("compile", exported.module)

    def run(self, artifact: Any, inputs: Sequence[np.ndarray], timer: Timer) -> list[np.ndarray]:
        """Interpret the graph with ``op``'s outputs corrupted: the known wrong answer."""
        outputs = timer.measure("run", lambda: _run_corrupting(artifact, inputs, self.op))
        if self.shy and len(outputs) > 1:
            return timer.measure("run", lambda: _run_corrupting(artifact, inputs, "none"))
        return outputs


def _run_corrupting(graph_module: Any, inputs: Sequence[np.ndarray], op: str) -> list[np.ndarray]:
    """Interpret ``graph_module`` on flat inputs, corrupting the outputs of ``op``;
    returns its flat outputs as numpy arrays."""
    import torch
    import torch.fx

    def corrupt(value: Any) -> Any:
        if isinstance(value, tuple):
            return (corrupt(value[0]), *value[1:])
        return value + 0.5 if value.is_floating_point() else _off_by_one(value)

    class Corrupting(torch.fx.Interpreter):
        def run_node(self, n: torch.fx.Node) -> Any:
            value = super().run_node(n)
            return corrupt(value) if n.op == "call_function" and str(n.target) == op else value

    args = [torch.from_numpy(np.ascontiguousarray(a)) for a in inputs]
    with torch.no_grad():
        outputs = Corrupting(graph_module).run(*args)
    from fuzz.model.dlrm import to_numpy

    return to_numpy(torch.utils._pytree.tree_leaves(outputs))


def _off_by_one(value: Any) -> Any:
    """An integer tensor off by one in every element, kept within [0, max]
    (a remainder of c stays below c, a quotient within its table); a boolean
    one negated."""
    import torch

    if value.dtype == torch.bool:
        return ~value
    if value.numel() == 0:
        return value
    return (value + 1) % (value.max() + 1)


_HEALTHY = EagerTarget("eager", "what a healthy fake target answers")
