"""Tuning on a real PostgreSQL server, started by the test itself (Debian's ``postgresql`` package: its
``initdb`` and ``pg_ctl``; skipped when they or the psycopg driver are missing): workers started at the
same moment on an empty database share one study, nothing crashes and no trial is lost."""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import optuna
import pytest

from ragsched.autosched import open_storage
from ragsched.autosched.tuning import database_url

ROOT = Path(__file__).resolve().parents[2]


def _pg_bin(name: str) -> str | None:
    found = shutil.which(name) or sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    return found if isinstance(found, str) else (found[-1] if found else None)


def _as_server_user(cmd: list[str]) -> list[str]:
    """PostgreSQL refuses to run as root: as root, the command runs as the ``postgres`` user."""
    if os.geteuid() != 0:
        return cmd
    runuser = shutil.which("runuser")
    if runuser is None:
        pytest.skip("running as root without runuser: cannot start PostgreSQL as another user")
    return [runuser, "-u", "postgres", "--", *cmd]


@pytest.fixture(scope="module")
def postgres_url():
    """A URL of an empty database on a PostgreSQL server running for this module's tests."""
    pytest.importorskip("psycopg", reason="the postgres extra (psycopg 3) is not installed")
    initdb, pg_ctl = _pg_bin("initdb"), _pg_bin("pg_ctl")
    if initdb is None or pg_ctl is None:
        pytest.skip("PostgreSQL's server (initdb, pg_ctl) is not installed")
    # not under pytest's temporary directory: that is private to this user, and the server may run as another
    base = Path(tempfile.mkdtemp(prefix="ragsched-pg-"))
    data = base / "data"
    if os.geteuid() == 0:
        import pwd

        try:
            user = pwd.getpwnam("postgres")
        except KeyError:
            pytest.skip("running as root and there is no postgres user to start PostgreSQL as")
        os.chown(base, user.pw_uid, user.pw_gid)
    with socket.socket() as s:  # a free port
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    subprocess.run(_as_server_user([initdb, "-D", str(data), "-U", "postgres", "--auth=trust", "-E", "UTF8"]),
                   check=True, capture_output=True)
    opts = f"-p {port} -k {base} -c listen_addresses=127.0.0.1 -c max_connections=50"
    subprocess.run(_as_server_user([pg_ctl, "-D", str(data), "-o", opts, "-l", str(base / "log"), "-w", "start"]),
                   check=True, capture_output=True)
    try:
        import psycopg

        with psycopg.connect(f"host=127.0.0.1 port={port} user=postgres dbname=postgres", autocommit=True) as c:
            c.execute("CREATE DATABASE ragsched")
        yield f"postgresql://postgres@127.0.0.1:{port}/ragsched"
    finally:
        subprocess.run(_as_server_user([pg_ctl, "-D", str(data), "-m", "immediate", "stop"]), capture_output=True)
        shutil.rmtree(base, ignore_errors=True)


def test_a_bare_postgresql_url_uses_psycopg_3():
    pytest.importorskip("psycopg")
    assert database_url("postgresql://u@h/db") == "postgresql+psycopg://u@h/db"
    assert database_url("postgres://u@h/db") == "postgresql+psycopg://u@h/db"
    assert database_url("postgresql+psycopg2://u@h/db") == "postgresql+psycopg2://u@h/db"
    assert database_url("sqlite:///t.db") == "sqlite:///t.db"


def test_workers_started_together_on_an_empty_database_share_one_study(postgres_url, tmp_path):
    """Four processes open the empty database at the same instant (each creates the schema; the losers of
    that race try again), then ``sched autoschedule --workers 2`` tunes on it: every trial is recorded."""
    start = time.time() + 3.0
    opener = ("import sys, time, optuna; from ragsched.autosched import open_storage; "
              "time.sleep(max(0.0, float(sys.argv[2]) - time.time())); "
              "optuna.create_study(storage=open_storage(sys.argv[1]), study_name='race', load_if_exists=True)")
    procs = [subprocess.Popen([sys.executable, "-c", opener, postgres_url, str(start)], cwd=ROOT,
                              stderr=subprocess.PIPE, text=True) for _ in range(4)]
    for p in procs:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
    assert len(optuna.study.get_all_study_summaries(open_storage(postgres_url))) == 1

    out = tmp_path / "blur.json"
    run = subprocess.run([sys.executable, "-m", "ragsched.cli", "autoschedule", str(ROOT / "pipelines" / "blur.py"),
                          "--scale", "small", "--trials", "6", "--repeats", "1", "--workers", "2", "--storage",
                          postgres_url, "--study", "shared", "-o", str(out), "--quiet"],
                         cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr
    study = optuna.load_study(study_name="shared", storage=open_storage(postgres_url))
    assert sum("same_as" not in t.user_attrs for t in study.trials) == 6  # (repeats are not counted)
    assert all(t.state in (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED) for t in study.trials)
    assert "worker 0: 3 trial(s)" in run.stdout and "worker 1: 3 trial(s)" in run.stdout
    assert out.is_file()
