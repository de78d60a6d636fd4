"""What a tuning run gives back, and where its study lives (shared by the CPU and GPU searches)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ..schedule import Schedule


@dataclass
class Tuning:
    """What a tuning run found."""

    schedule: Schedule
    seconds: float | None  # the best schedule's median time (None: nothing was measured)
    trials: int  # trials in the study, all workers together
    failures: dict[str, int] = field(default_factory=dict)  # status -> trials, this run's
    tuning_s: float = 0.0  # this run's wall time
    study: object = None  # the optuna.Study


def open_storage(storage):
    """None: in memory; a URL (``sqlite:///t.db``, ``postgresql://...``): a database; anything else: the
    path of an Optuna journal file."""
    import optuna

    if storage is None or not isinstance(storage, (str, Path)):
        return storage
    text = str(storage)
    if "://" in text:
        return optuna.storages.RDBStorage(text)
    Path(text).parent.mkdir(parents=True, exist_ok=True)
    from optuna.storages.journal import JournalFileBackend

    return optuna.storages.JournalStorage(JournalFileBackend(text))


def tell_failed(study, trial) -> None:
    """Close a trial whose candidate gave no time (not compiled within its limit, refused, wrong, crashed;
    its status and message are in its user attributes) as PRUNED, not FAIL: Optuna's TPE sampler ignores
    FAIL trials, so it kept proposing the same kind of candidate (19 of 34 trials of a 5-minute tuning
    of a 32-stage stencil chain each spent the 20 s compile limit), while PRUNED ones rank below every
    measured trial."""
    import optuna

    study.tell(trial, state=optuna.trial.TrialState.PRUNED)
