"""The tuning history as a picture: each trial's time, and the best so far."""

from __future__ import annotations


def plot_history(study, path, title: str = "autoschedule") -> None:
    """Draw every measured trial's time (ms) and the running best against the trial number into ``path``
    (PNG); failed trials are marked along the bottom."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import optuna

    trials = study.get_trials(deepcopy=False)
    done = [(t.number, t.value * 1e3) for t in trials if t.state == optuna.trial.TrialState.COMPLETE]
    failed = [t.number for t in trials if t.state in (optuna.trial.TrialState.FAIL, optuna.trial.TrialState.PRUNED)]
    fig, ax = plt.subplots(figsize=(7, 4))
    if done:
        xs, ys = zip(*done)
        ax.scatter(xs, ys, s=12, label="trial")
        best, run = [], float("inf")
        for y in ys:
            run = min(run, y)
            best.append(run)
        ax.step(xs, best, where="post", color="C1", label="best so far")
        ax.set_yscale("log")
    if failed:
        low = min((y for _, y in done), default=1.0)
        ax.scatter(failed, [low * 0.8] * len(failed), marker="x", color="C3", s=12, label="failed")
    ax.set_xlabel("trial")
    ax.set_ylabel("median time (ms)")
    ax.set_title(title)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
