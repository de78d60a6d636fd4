"""The autoscheduler: a search space over whole-pipeline schedules, a zero-trial rule schedule, an
Optuna study that asks for candidates and a worker process that measures them."""

from .driver import autoschedule, tune  # noqa: F401
from .tuning import Tuning, open_storage  # noqa: F401
