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
    repeated: int = 0  # this run's trials whose schedule an earlier trial had timed (not counted in ``trials=``)


def open_storage(storage):
    """None: in memory; a URL (``sqlite:///t.db``, ``postgresql://...``): a database; anything else: the
    path of an Optuna journal file."""
    import optuna

    if storage is None or not isinstance(storage, (str, Path)):
        return storage
    text = str(storage)
    if "://" in text:
        return _database(database_url(text))
    Path(text).parent.mkdir(parents=True, exist_ok=True)
    from optuna.storages.journal import JournalFileBackend

    return optuna.storages.JournalStorage(JournalFileBackend(text))


def database_url(url: str) -> str:
    """``url`` with the PostgreSQL driver named where it names none: SQLAlchemy 2.1 takes a bare
    ``postgresql://`` for psycopg2, while the ``postgres`` extra installs psycopg 3 (``postgresql+psycopg``).
    A URL that names its driver (``postgresql+psycopg2://``) is kept as written."""
    scheme, sep, rest = url.partition("://")
    if scheme in ("postgresql", "postgres"):
        try:
            import psycopg  # noqa: F401
        except ImportError as err:
            raise ValueError(f"storage {scheme}://...: no PostgreSQL driver; install ragsched[postgres] "
                             "(psycopg 3), or name another driver (postgresql+psycopg2://...)") from err
        return f"postgresql+psycopg{sep}{rest}"
    return url


#: tries at opening a database that other workers may be creating the tables of at the same moment
OPEN_TRIES = 5


def _database(url: str):
    """Optuna's RDBStorage on ``url``. Workers started together on an empty database each create the
    schema; all but one fail on what the first made (``CREATE TYPE ... already exists``, a duplicate
    key in a catalogue): those try again, and then find the tables there."""
    import random
    import time

    import optuna
    import sqlalchemy.exc

    for k in range(OPEN_TRIES):
        try:
            return optuna.storages.RDBStorage(url)
        except sqlalchemy.exc.SQLAlchemyError as err:
            if k == OPEN_TRIES - 1 or not _a_race(err):
                raise
            time.sleep(0.2 * (k + 1) + 0.2 * random.random())


def _a_race(err) -> bool:
    """Whether a failure to open a database is another worker creating its schema at the same moment."""
    text = str(err).lower()
    return "already exists" in text or "duplicate key" in text or "unique constraint" in text


def tell_failed(study, trial) -> None:
    """Close a trial whose candidate gave no time (not compiled within its limit, refused, wrong, crashed;
    its status and message are in its user attributes) as PRUNED, not FAIL: Optuna's TPE sampler ignores
    FAIL trials, so it kept proposing the same kind of candidate (19 of 34 trials of a 5-minute tuning
    of a 32-stage stencil chain each spent the 20 s compile limit), while PRUNED ones rank below every
    measured trial."""
    import optuna

    study.tell(trial, state=optuna.trial.TrialState.PRUNED)
