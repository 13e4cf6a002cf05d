"""A fixed list of samples outside a test: what benchmarks and sweeps run.

Hypothesis is built to drive a test function, not to hand out values; this
runs its generate phase under a seed and keeps the first ``count`` distinct
samples that ``accept`` takes (Hypothesis may draw one sample twice).
"""

from __future__ import annotations

from typing import Callable

from fuzz.sample import Sample
from strategies.samples import samples

__all__ = ["draw_samples"]


def draw_samples(count: int, seed: int,
                 accept: Callable[[Sample], bool] = lambda sample: True) -> list[Sample]:
    """Up to ``count`` distinct samples of the default strategy, in draw order,
    under Hypothesis seed ``seed``; gives up after ``20 * count`` draws."""
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as hypothesis_seed

    drawn: list[Sample] = []
    seen: set[tuple[str, int, bytes]] = set()

    @hypothesis_seed(seed)
    @settings(max_examples=count * 20, database=None, phases=[Phase.generate], deadline=None,
              suppress_health_check=list(HealthCheck), print_blob=False)
    @given(samples())
    def collect(sample: Sample) -> None:
        key = (sample.config.to_json(), sample.seed, sample.npz_bytes())
        if len(drawn) < count and key not in seen and accept(sample):
            seen.add(key)
            drawn.append(sample)

    collect()
    return drawn
