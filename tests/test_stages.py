"""Stage boundaries (unit): a toolchain exception becomes a ``StageFailure``
whose message keeps the evidence, its explicit cause included, without
moving the first line that bucket keys are read from."""

from __future__ import annotations

import pytest

from fuzz.targets.pipeline import StageFailure, run_stage
from oracles.classify import first_error_line


def _device_creation_failure() -> None:
    try:
        raise RuntimeError("cuda_driver.c:136: RESOURCE_EXHAUSTED; CUDA error "
                           "'CUDA_ERROR_OUT_OF_MEMORY' (2): out of memory\nmore detail")
    except RuntimeError as exc:
        # What iree.runtime raises when no device of a driver can be created.
        raise ValueError("Could not create device. Exception for last tried follows.") from exc


@pytest.mark.parametrize("capture", [True, False])
def test_an_explicit_cause_is_kept_on_a_last_line(capture: bool) -> None:
    with pytest.raises(StageFailure) as caught:
        run_stage("run", _device_creation_failure, capture_stderr=capture)
    message = caught.value.message
    assert message.splitlines()[-1] == ("caused by RuntimeError: cuda_driver.c:136: "
                                        "RESOURCE_EXHAUSTED; CUDA error 'CUDA_ERROR_OUT_OF_MEMORY' "
                                        "(2): out of memory")
    assert first_error_line(message) == "Could not create device. Exception for last tried follows."
    assert caught.value.error_type == "ValueError"


def test_an_exception_without_a_cause_is_kept_as_it_is() -> None:
    def fails() -> None:
        try:
            raise KeyError("inner")
        except KeyError:
            raise ValueError("outer") from None

    with pytest.raises(StageFailure) as caught:
        run_stage("compile", fails, capture_stderr=False)
    assert caught.value.message == "outer"
