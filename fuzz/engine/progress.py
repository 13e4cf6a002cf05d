"""Live progress of a campaign: one status line that redraws itself on a
terminal (rich), plain timestamped lines when the output is piped to a file
or a CI log (which a redrawing line would fill with control codes).

It reads the campaign's report (samples, batches, buckets) and the phase it
was told of; NEW-bucket lines are printed above the status line as before.
"""

from __future__ import annotations

import time
from typing import Any

from rich.console import Console
from rich.live import Live
from rich.text import Text

__all__ = ["CampaignProgress"]


def _clock(seconds: float) -> str:
    seconds = max(0, int(seconds))
    return f"{seconds // 60}m{seconds % 60:02d}s"


class CampaignProgress:
    """``phase`` / ``update`` / ``print`` while a campaign runs; ``close`` at the end."""

    def __init__(self, console: Console, budget_s: float, every_s: float = 30.0) -> None:
        self.console = console
        self.budget_s = budget_s
        self.every_s = every_s
        self.started = time.monotonic()
        self.phase_name = "start"
        self._report: Any = None
        self._last_line = float("-inf")  # the first update prints, whatever the clock
        self._live: Live | None = None
        if console.is_terminal:
            self._live = Live(get_renderable=self._render, console=console,
                              refresh_per_second=2, transient=True)
            self._live.start()

    def line(self) -> str:
        """elapsed / remaining, phase, samples, batches, buckets."""
        elapsed = time.monotonic() - self.started
        report = self._report
        figures = ""
        if report is not None:
            figures = (f" | samples {report.samples} | batches {report.batches_checked}"
                       f" | buckets {len(report.findings)} ({len(report.new_buckets)} new)")
        return (f"{_clock(elapsed)} elapsed, {_clock(self.budget_s - elapsed)} left"
                f" | {self.phase_name}{figures}")

    def _render(self) -> Text:
        return Text(self.line(), style="bold")

    def phase(self, name: str, report: Any) -> None:
        """Announce a new campaign phase and show it on the status line."""
        self.phase_name, self._report = name, report
        self.print(f"-- {name}")

    def update(self, report: Any) -> None:
        """After each checked sample: a redraw, or a plain line every ``every_s``."""
        self._report = report
        now = time.monotonic()
        if self._live is None and now - self._last_line >= self.every_s:
            self._last_line = now
            self.console.print(self.line(), markup=False, highlight=False, soft_wrap=True)

    def print(self, text: str) -> None:
        """A line above the status line (NEW buckets, phases)."""
        self.console.print(text, markup=False, highlight=False, soft_wrap=True)

    def close(self) -> None:
        """Stop the live status line so later output prints normally."""
        if self._live is not None:
            self._live.stop()
            self._live = None
