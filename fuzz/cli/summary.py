"""A campaign's report on the terminal: the summary table (phases, actionable,
cut at the deadline, localized / ablated), the outcomes per target and
verdict, the new buckets with their shrink and repro status, and the
coverage table. Printing only: the report is ``fuzz.engine.records``'.
"""

from __future__ import annotations

import signal
from collections import Counter

from rich.console import Console
from rich.table import Table
from rich.text import Text

from fuzz.engine.campaign import CampaignReport
from fuzz.engine.coverage import COLUMNS, FOCUS_ROW
from fuzz.store.corpus import HELD


def _summary(console: Console, report: CampaignReport) -> None:
    head = Table(title="campaign summary", show_header=False)
    _row(head, "samples", str(report.samples))
    if report.coverage.focus is not None:
        inside = report.coverage.counts.get(FOCUS_ROW, Counter())["generated"]
        _row(head, "focus", f"{report.coverage.focus.label}: {inside} samples inside")
    _row(head, "targets", ", ".join(report.targets))
    _row(head, "configs compiled", str(report.configs_compiled))
    _row(head, "batches checked", str(report.batches_checked))
    _row(head, "elapsed", f"{report.elapsed_s:.1f}s")
    _row(head, "failures", str(len(report.findings)))
    _row(head, "new buckets", str(len(report.new_buckets)))
    _row(head, "workers replaced", str(report.workers_replaced))
    stages = ", ".join(f"{k} {v:.1f}s" for k, v in sorted(report.stage_seconds.items()))
    _row(head, "time in stages", stages or "-")
    phases = ", ".join(f"{k} {v:.1f}s" for k, v in report.phase_seconds.items())
    if report.shrink_s:
        phases += f" (of which shrinking {report.shrink_s:.1f}s)"
    if report.report_costs:
        phases += (f"; {len(report.report_seconds)} report jobs, "
                   f"{sum(report.report_seconds):.1f} worker-s")
    _row(head, "time in phases", phases or "-")
    ready, unconfirmed = report.actionable()
    if report.new_buckets:
        line = f"{len(ready)}/{len(report.new_buckets)} new buckets shrunk and reproducing"
        if unconfirmed:
            line += "; unconfirmed: " + "; ".join(f"{bucket} ({why})"
                                                  for bucket, why in unconfirmed.items())
        _row(head, "actionable", line)
    if report.held_back:
        _row(head, "held back", "; ".join(f"{bucket} ({why})" for bucket, why
                                          in report.held_back.items())
             + f" (a wrong answer localization could not see waits in the corpus's {HELD}/ until "
               "its model repro reproduces)")
    if report.road_samples or report.road_samples_left_out:
        sent = ", ".join(f"{name} {count}" for name, count in sorted(report.road_samples.items()))
        roads = sum(v for k, v in report.target_seconds.items() if k in report.road_samples)
        spent = sum(report.target_seconds.values())
        _row(head, "road targets", f"samples sent: {sent or 'none'}; {report.road_samples_left_out} "
                                   f"samples without them; {roads:.0f}s of the targets' "
                                   f"{spent:.0f}s (share {report.road_share:g}, --road-share)")
    _row(head, "localized / ablated", f"{report.localizations} / {report.ablations}")
    if report.draws_checked:
        _row(head, "extra weight draws", f"{report.draws_checked} checked on their sample's "
                                         f"artifact, {report.draws_reseeded} failed and re-run")
    _row(head, "workers busy", f"{report.busy_fraction:.0%} of {report.workers} x "
                               f"{report.elapsed_s:.0f}s")
    if report.allocation:
        _row(head, "re-run on every target", f"{report.confirm_runs} samples (a new bucket "
                                             "seen on a partial schedule)")
        _row(head, "sent to no target", f"{report.unscheduled} samples (every program group "
                                        "would have landed in known buckets)")
    if report.cut_jobs or report.cut_running or report.cut_unfiled:
        _row(head, "cut when the budget ended",
             f"{report.cut_jobs} queued jobs dropped, {report.cut_running} running jobs not "
             f"waited for, {report.cut_samples} samples not judged"
             + "".join(f"; {line}" for line in report.cut_unfiled))
    if report.skipped:
        _row(head, "skipped samples", f"{len(report.skipped)} (eager PyTorch ran out of a "
                                      "worker's memory: raise --memory-mb to check them)")
    if report.interrupted is not None:
        _row(head, "stopped by", signal.Signals(report.interrupted).name)
    console.print(head)
    if report.replays:
        replay = Table(title="replay of the stored cases")
        for column in ("bucket", "target", "status", "now in", "seconds"):
            replay.add_column(column, overflow="fold")
        for replayed in report.replays:
            _row(replay, replayed.bucket, replayed.target,
                           replayed.status.value + (f" ({replayed.note})" if replayed.note else ""),
                           ", ".join(replayed.now) or "-", f"{replayed.seconds:.1f}")
        console.print(replay)
    verdicts = Table(title="outcomes by target and verdict")
    for column in ("target", "verdict", "count"):
        verdicts.add_column(column)
    for (target, verdict), count in sorted(report.outcomes.items()):
        _row(verdicts, target, verdict, str(count))
    console.print(verdicts)
    if report.allocation:
        allocation = Table(title="schedule: samples per program group (fewer where the "
                                 "outcome keeps being the same known bucket)")
        for column in ("program group", "cells", "offered", "run", "skipped"):
            allocation.add_column(column, justify="left" if column == "program group" else "right")
        for group, cells, offered, run in report.allocation:
            _row(allocation, group, str(cells), str(offered), str(run), str(offered - run))
        console.print(allocation)
    if report.coverage.counts:
        console.print(_coverage_table(report))
    if report.new_buckets:
        found = Table(title="new failure buckets")
        for column in ("bucket", "owner on targets", "verdict", "culprit / first error line",
                       "repro.py"):
            found.add_column(column, overflow="fold")
        for finding in report.new_buckets:
            o = finding.outcome
            _row(found, finding.bucket, f"{finding.owner} on {', '.join(finding.targets)}",
                          o.verdict.value, (finding.culprit or o.error)[:120],
                          report.repro_status.get(finding.bucket, "-"))
        console.print(found)
    if report.shrinks:
        shrunk = Table(title="shrinking (size: tables/examples/indices)")
        for column in ("bucket", "target", "before", "after", "steps", "rejected", "steps/s",
                       "seconds", "stored"):
            shrunk.add_column(column, overflow="fold")
        for record in report.shrinks:
            r = record.record
            seconds, tried = _number(r.get("seconds")), _number(r.get("steps_tried"))
            after = str(r["skipped"]) if "skipped" in r else \
                f"one op: {r.get('op')}" if r.get("stopped") == "single-op" \
                else _size(r.get("size_after"))
            _row(shrunk, record.bucket, record.target, _size(r.get("size_before")), after,
                           f"{r.get('steps_accepted', 0)}/{r.get('steps_tried', 0)}",
                           str(r.get("steps_rejected", 0)),
                           f"{tried / seconds:.1f}" if seconds > 0 else "-",
                           f"{seconds:.1f}",
                           "replaced" if record.replaced else "kept")
        console.print(shrunk)


def _coverage_table(report: CampaignReport) -> Table:
    """Samples per knob value, and how far at least one target got with them."""
    focus = report.coverage.focus
    table = Table(title="coverage: samples per knob value (got through, on at least one target)"
                  + (f"; focus: {focus.label}" if focus is not None else ""))
    for column in ("knob value", *COLUMNS):
        table.add_column(column, justify="left" if column == "knob value" else "right")
    for knob, counts in report.coverage.rows():
        _row(table, knob, *(str(count) for count in counts))
    return table


def _number(value: object) -> float:
    """A count or duration read from a JSON record; 0 when absent."""
    return float(value) if isinstance(value, (int, float)) else 0.0


def _row(table: Table, *cells: str) -> None:
    """Cells as plain text: error lines and culprits hold brackets
    (``[per_sample_weights]``) that rich would otherwise take for markup."""
    table.add_row(*(Text(cell) for cell in cells))


def _size(size: object) -> str:
    if not isinstance(size, dict):
        return "-"
    return f"{size.get('tables', '?')}/{size.get('examples', '?')}/{size.get('indices', '?')}"
