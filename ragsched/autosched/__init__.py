"""The autoscheduler: a search space over whole-pipeline schedules, a zero-trial rule schedule, an
Optuna study that asks for candidates and a worker process that measures them."""

from .driver import Tuning, autoschedule, open_storage, tune  # noqa: F401
