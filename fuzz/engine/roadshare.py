"""The roads' share of a campaign: the targets of the other roads into IREE
(iree-turbine, ONNX, onnxruntime: ``fuzz.targets.catalog.ROAD_TARGETS``)
get a sample only while their stage seconds are at most ``share`` of all
targets' stage seconds so far.

Why: on 2 cores one ONNX export costs 1-3 s a sample and form, turbine's
export and compile 1-4 s, while the 18 FX-road targets together cost about
as much as one of them (seed 1, first 20 samples: 155 s for four road
targets, 49 s for the 18 others). Sent every sample, three road targets cut
the samples a 10-minute default campaign checks by 43 %. Under a share they
see a sample in every few, the FX road keeps its pace, and the roads still
meet their own faults (an export failure of the exporter is met on most
samples that reach it). A road target is never left out of a campaign whose
targets are all roads, and ``share`` 1 sends every sample to every road.
"""

from __future__ import annotations

from typing import Sequence

from fuzz.engine.records import CampaignReport
from fuzz.targets.catalog import ROAD_TARGETS, Target

__all__ = ["RoadShare"]


class RoadShare:
    """Which targets a generated sample goes to: every target, less the road
    targets while they are over their share of the targets' stage seconds."""

    def __init__(self, report: CampaignReport, share: float, targets: Sequence[Target]) -> None:
        if not 0.0 < share <= 1.0:
            raise ValueError(f"road_share={share!r}: must be > 0 and <= 1 (1: every sample "
                             f"to every road target)")
        self.report = report
        self.share = share
        self.roads = frozenset(t.name for t in targets if t.name in ROAD_TARGETS)
        # Capped only beside other targets: a campaign of roads alone runs them all.
        self.capped = share < 1.0 and bool(self.roads) and len(self.roads) < len(targets)

    def over(self) -> bool:
        """Whether the road targets have taken more than their share so far."""
        spent = self.report.target_seconds
        total = sum(spent.values())
        return sum(spent.get(name, 0.0) for name in self.roads) > self.share * total

    def targets_for(self, targets: list[Target]) -> list[Target]:
        """``targets`` for the next generated sample: without the road
        targets while they are over their share (counted in the report)."""
        if self.capped and self.over():
            self.report.road_samples_left_out += 1
            return [t for t in targets if t.name not in self.roads]
        sent = self.report.road_samples
        for name in (t.name for t in targets if t.name in self.roads):
            sent[name] = sent.get(name, 0) + 1
        return targets
