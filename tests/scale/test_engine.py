"""tracekit.engine.map_per_rank: order, inline runs, typed errors from workers, Ctrl-C, Dask;
tracekit.engine.beside: one call in a process of its own.

The Dask tests start a real 2-worker ``distributed.LocalCluster`` with worker processes.
"""

from __future__ import annotations

import gzip
import multiprocessing as mp
import operator
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tracekit.engine import beside, map_per_rank
from tracekit.errors import BadInputError, ConfigError, TracekitError
from tracekit.parsers.kineto import load_kineto_file


def _bad_and_good(tmp_path: Path) -> list[Path]:
    good = tmp_path / "rank0.json"
    good.write_text('{"distributedInfo": {"rank": 0}, "traceEvents": ['
                    '{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1,'
                    ' "ts": 1.5, "dur": 2.25, "args": {}}]}')
    bad = tmp_path / "rank1.json.gz"
    bad.write_bytes(gzip.compress(good.read_bytes())[:-20])  # truncated gzip
    return [good, bad]


def test_local_results_keep_input_order() -> None:
    # GIVEN more items than workers WHEN mapped on 2 processes THEN results follow the input
    items = list(range(23))
    assert map_per_rank(operator.neg, items, jobs=2) == [-x for x in items]


def test_one_job_runs_inline_without_pickling() -> None:
    # GIVEN a lambda (not picklable) WHEN jobs=1 THEN it runs in this process and works
    assert map_per_rank(lambda x: x * 2, [1, 2, 3], jobs=1) == [2, 4, 6]
    # and a single item never starts a pool either
    assert map_per_rank(lambda x: x + 1, [41], jobs=4) == [42]


def test_worker_bad_input_error_keeps_type_message_and_path(tmp_path: Path) -> None:
    # GIVEN a run with one truncated gzip rank
    files = _bad_and_good(tmp_path)
    with pytest.raises(BadInputError) as inline:
        load_kineto_file(files[1])
    # WHEN parsed in worker processes
    with pytest.raises(BadInputError) as err:
        map_per_rank(load_kineto_file, files, jobs=2)
    # THEN the caller gets the same class, path and one-line message as an inline call
    assert type(err.value) is BadInputError
    assert err.value.path == str(files[1])
    assert err.value.one_line() == inline.value.one_line()
    assert "\n" not in err.value.one_line()


def test_bad_engine_options_are_config_errors() -> None:
    with pytest.raises(ConfigError, match="unknown engine"):
        map_per_rank(operator.neg, [1], engine="spark")
    with pytest.raises(ConfigError, match="--scheduler needs --engine dask"):
        map_per_rank(operator.neg, [1], scheduler="tcp://127.0.0.1:8786")
    with pytest.raises(ConfigError, match="at least 1"):
        map_per_rank(operator.neg, [1], jobs=0)


def test_ctrl_c_stops_the_workers() -> None:
    # GIVEN workers sleeping for a minute each, and Python's Ctrl-C handler in place (a
    # launcher such as `cmd &` in a script starts the test run with SIGINT ignored)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    timer = threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    started = time.monotonic()
    # WHEN Ctrl-C reaches the caller THEN it is raised there and no worker is left behind
    try:
        with pytest.raises(KeyboardInterrupt):
            map_per_rank(time.sleep, [60.0] * 4, jobs=2)
    finally:
        timer.cancel()
        signal.signal(signal.SIGINT, previous)
    assert time.monotonic() - started < 60.0  # did not wait for the sleeps
    assert mp.active_children() == []


# eval of this text is a picklable call that says which process ran it
_PID = "__import__('os').getpid()"


def test_beside_runs_in_its_own_process_or_inline() -> None:
    # GIVEN a call started beside this process WHEN its result is asked for THEN another
    # process ran it; without ``separate`` this one did, and no worker is left either way
    assert beside(eval, _PID, separate=True).result() != os.getpid()
    assert beside(eval, _PID, separate=False).result() == os.getpid()
    assert mp.active_children() == []


def test_beside_error_keeps_type_and_path_and_close_stops_it(tmp_path: Path) -> None:
    # GIVEN a truncated gzip rank parsed beside this process
    bad = _bad_and_good(tmp_path)[1]
    # THEN its BadInputError reaches the caller with its class and path
    with pytest.raises(BadInputError) as err:
        beside(load_kineto_file, bad, separate=True).result()
    assert type(err.value) is BadInputError and err.value.path == str(bad)
    # AND a call whose result is not wanted is stopped by close(), without waiting for it
    started = time.monotonic()
    call = beside(time.sleep, 60.0, separate=True)
    call.close()
    assert time.monotonic() - started < 30.0
    assert mp.active_children() == []


def test_forkserver_preloads_what_the_workers_need() -> None:
    # GIVEN a fresh process (the forkserver keeps the modules it started with) WHEN a map
    # names a module to preload THEN the workers have it before their first task
    code = ("from tracekit.engine import map_per_rank\n"
            "print(map_per_rank(eval, [\"'colorsys' in __import__('sys').modules\"] * 2,"
            " jobs=2, preload=['colorsys']))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, check=True)
    assert done.stdout.strip() == "[True, True]"


@pytest.fixture(scope="module")
def dask_client():
    pytest.importorskip("distributed")
    from tracekit.engine.dask import client_for

    with client_for(2) as client:
        yield client


def test_dask_cluster_gives_local_results(dask_client) -> None:
    from tracekit.engine.dask import map_dask

    # GIVEN a 2-worker LocalCluster WHEN the same function is mapped THEN same list as local
    items = list(range(17))
    assert len(dask_client.scheduler_info()["workers"]) == 2
    assert map_dask(operator.neg, items, client=dask_client) == map_per_rank(
        operator.neg, items, jobs=2)


def test_dask_worker_bad_input_error_reaches_caller(dask_client, tmp_path: Path) -> None:
    from tracekit.engine.dask import map_dask

    files = _bad_and_good(tmp_path)
    with pytest.raises(BadInputError) as err:
        map_dask(load_kineto_file, files, client=dask_client)
    assert err.value.path == str(files[1])
    assert isinstance(err.value, TracekitError)


def test_engine_dask_option_starts_and_closes_its_own_cluster() -> None:
    pytest.importorskip("distributed")
    # GIVEN engine="dask" and no scheduler WHEN mapped THEN a LocalCluster runs it, in order
    assert map_per_rank(operator.neg, [3, 1, 2], engine="dask", jobs=2) == [-3, -1, -2]


def test_unreachable_scheduler_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("distributed")
    from tracekit.engine import dask as engine_dask

    # GIVEN a closed port, and the connect wait cut from its 20 s default (the error is the
    # same whatever the wait) WHEN the engine is pointed at it THEN a one-line ConfigError
    monkeypatch.setattr(engine_dask, "CONNECT_TIMEOUT_S", 1.0)
    with pytest.raises(ConfigError, match="cannot reach the Dask scheduler"):
        map_per_rank(operator.neg, [1, 2], engine="dask", scheduler="tcp://127.0.0.1:9")


def test_connect_timeout_is_passed_to_the_client(monkeypatch: pytest.MonkeyPatch) -> None:
    distributed = pytest.importorskip("distributed")
    from tracekit.engine.dask import client_for

    # GIVEN a Client that records its timeout and refuses
    seen: list[object] = []

    def refuse(address: str, timeout: object = None, **_: object) -> None:
        seen.append(timeout)
        raise OSError("refused")

    monkeypatch.setattr(distributed, "Client", refuse)
    # WHEN connecting with the default and with an explicit wait
    for wait in (None, 0.5):
        with pytest.raises(ConfigError), client_for(scheduler="tcp://127.0.0.1:9",
                                                    connect_timeout=wait):
            pass
    # THEN the default is 20 s and the argument replaces it
    assert seen == ["20.0s", "0.5s"]


def test_existing_cluster_by_scheduler_address(dask_client) -> None:
    # GIVEN a running cluster reachable at tcp://HOST:PORT (what --scheduler takes)
    address = dask_client.scheduler.address
    assert address.startswith("tcp://")
    # WHEN the engine is pointed at it THEN it runs the items there, in order, and leaves
    # the cluster running (it is not the engine's to close)
    assert map_per_rank(operator.neg, list(range(9)), engine="dask",
                        scheduler=address) == [-i for i in range(9)]
    assert len(dask_client.scheduler_info()["workers"]) == 2
