"""The corpus as one campaign knows it: which buckets are stored, how big each
stored case is, and filing a finding there. A finding in a new bucket is a
new case; one in a known bucket adds the targets it was seen on and replaces
the stored case only with a strictly smaller one (``fuzz.triage.edits.size_key``).
Apart from the campaign so that what the corpus holds, and the one way a
finding becomes a ``CorpusEntry``, live in one place; what the bug work does
with a new or replaced case is ``fuzz.engine.bugwork``'s. A case held back
(a wrong answer that vanished when its intermediates were exposed) waits in
the corpus's holding area (``corpus.HELD``) until its repro reproduces, and
is then promoted into the corpus."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from fuzz.engine.interrupt import deferred
from fuzz.model.sample import Sample
from fuzz.store import corpus
from fuzz.store.corpus import CorpusEntry
from fuzz.triage.edits import size_key
from fuzz.triage.findings import Finding

__all__ = ["Ledger", "Filed", "entry_of"]

# What filing did: a new case; a smaller case replacing the stored one; the
# stored case kept (the targets seen added); or nothing stored (a race lost
# to another campaign sharing the folder); or the case held back until its
# repro reproduces.
Filed = Literal["new", "replaced", "seen", "not stored", "held"]


def entry_of(finding: Finding, sample: Sample, campaign_seed: int,
             repairs: tuple[str, ...] = ()) -> CorpusEntry:
    """The corpus entry a finding on ``sample`` is stored as."""
    outcome = finding.outcome
    return CorpusEntry(
        bucket=finding.bucket, signature=finding.key, verdict=finding.verdict,
        owner=finding.owner, target=finding.target, sample=sample, stage=outcome.stage,
        error=outcome.error, op=outcome.op, culprit=finding.culprit,
        localization=finding.localization, numbers=outcome.numbers,
        timings=outcome.timings, seen_on=finding.targets, features=tuple(sample.features()),
        campaign_seed=campaign_seed, detail=outcome.detail, texts=finding.result.texts,
        repairs=repairs)


class Ledger:
    """The buckets of one corpus folder and the sizes of their stored cases."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.stored, _ = corpus.load(root)
        self.known = {entry.bucket for entry in self.stored}
        self._sizes: dict[str, tuple[int, ...]] = {}
        self.held: set[str] = set()  # buckets this campaign holds back (``corpus.HELD``)
        # Buckets whose minimal case is one op (shrink ``stopped: single-op``):
        # their repro is that op, so a smaller model case changes nothing in
        # the bug report and is not stored (each replacement cost a report job
        # of ~20 worker-s that found the same op again: seed 1, 7 buckets).
        self.one_op = {e.bucket for e in self.stored
                       if (e.shrink or {}).get("stopped") == "single-op"}

    def file(self, finding: Finding, sample: Sample, campaign_seed: int,
             repairs: tuple[str, ...] = (), hold: bool = False) -> tuple[Filed, CorpusEntry]:
        """Store ``finding`` (atomically: a stop signal waits until the entry is
        whole); sets ``finding.path`` and ``finding.new``. ``hold``: a new
        bucket goes to the holding area instead (``promote`` stores it)."""
        entry = entry_of(finding, sample, campaign_seed, repairs)
        finding.path = self.root / finding.bucket
        with deferred():
            if finding.bucket in self.held:  # one held case per bucket, waiting for its repro
                finding.path = self.root / corpus.HELD / finding.bucket
                return "seen", entry
            if hold and finding.bucket not in self.known:
                path = corpus.hold(self.root, entry)
                finding.new = False  # not a bucket of the corpus until promoted
                if path is None:
                    return "not stored", entry
                finding.path = path
                self.held.add(finding.bucket)
                return "held", entry
            if finding.bucket in self.known:
                corpus.record_seen(self.root, finding.bucket, finding.targets)
                size = size_key(sample)
                if finding.bucket not in self.one_op and size < self.stored_size(finding.bucket) and \
                        corpus.replace_if_smaller(self.root, entry, size_key):
                    self._sizes[finding.bucket] = size
                    return "replaced", entry
                return "seen", entry
            path = corpus.save(self.root, entry)
            self.known.add(finding.bucket)
            finding.new = path is not None
            if not finding.new:
                return "not stored", entry
            self._sizes[finding.bucket] = size_key(sample)
            return "new", entry

    def promote(self, bucket: str) -> bool:
        """A held case whose repro reproduced joins the corpus; False when the
        corpus had the bucket already (another campaign sharing the folder)."""
        with deferred():
            path = corpus.promote(self.root, bucket)
        self.held.discard(bucket)
        if path is None:
            return False
        self.known.add(bucket)
        return True

    def stored_size(self, bucket: str) -> tuple[int, ...]:
        """The size key of the case stored for ``bucket`` (empty for a junk entry: never replaced by us)."""
        if bucket not in self._sizes:
            try:
                self._sizes[bucket] = size_key(corpus.load_entry(self.root / bucket).sample)
            except (OSError, ValueError, KeyError, TypeError):
                self._sizes[bucket] = ()
        return self._sizes[bucket]
