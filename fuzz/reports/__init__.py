"""Words and scripts for upstream: standalone repros (``repro``), files for
the toolchain's own command-line tools (``toolfiles``), REPORT.md and the
corpus digest (``markdown``), and the job that writes them for a bucket
(``bugreport``). A new repro form goes here."""

__all__: list[str] = []
