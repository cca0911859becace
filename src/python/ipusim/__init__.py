# SPDX-License-Identifier: Apache-2.0
"""Drive ipusim from Python: compile and simulate runs, sweep a grid, compare two runs.

Every call runs the ``ipusim`` executable in a child process (SystemC elaborates one model
per process, so a notebook can run as many simulations as it likes) and reads what the
command line writes: ``run`` returns stats.json as nested dicts whose numbers carry their
units (``{"value": ..., "unit": ...}``), with the run directory's layers.csv, tiles.csv,
plan.csv and supersteps.csv as pandas DataFrames when pandas is installed (lists of dicts
otherwise). A failed command raises an :class:`IpusimError` subclass carrying the command
line's message, the file, line and key it names, and its exit status (docs/errors.md).

The executable is ``$IPUSIM_BINARY`` if set, else the one of the build tree this package was
copied into by CMake, else ``ipusim`` on the PATH. docs/python.md has a worked study.
"""

import concurrent.futures
import csv
import itertools
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading

__all__ = [
    "run", "compile", "sweep", "compare", "binary",
    "IpusimError", "UsageError", "ConfigError", "ModelError", "CheckError", "ResourceError",
    "OutputError", "InternalError", "SweepInterrupted",
]


class IpusimError(Exception):
    """A failed ipusim command: ``message`` (the line after ``error:``), ``file``, ``line``
    and ``key`` where the message names them (else None), ``status`` (the exit status) and
    ``command`` (the argument list)."""

    def __init__(self, message, status, command, file=None, line=None, key=None):
        super().__init__(message)
        self.message = message
        self.status = status
        self.command = command
        self.file = file
        self.line = line
        self.key = key


class InternalError(IpusimError):
    """Exit status 1: a bug in ipusim."""


class UsageError(IpusimError):
    """Exit status 2: a bad command line (an option this package passed on)."""


class ConfigError(IpusimError):
    """Exit status 3: a malformed config, model or trace, an unknown key, a bad value."""


class ModelError(IpusimError):
    """Exit status 4: well formed, but the modelled hardware cannot run it (out of memory)."""


class CheckError(IpusimError):
    """Exit status 5: a regression case moved, or a sweep point failed."""


class ResourceError(IpusimError):
    """Exit status 6: ipusim ran out of memory."""


class OutputError(IpusimError):
    """Exit status 7: an output could not be written."""


class SweepInterrupted(KeyboardInterrupt):
    """An interrupted :func:`sweep` (Ctrl-C): the points not yet started were cancelled, the
    running ones stopped (SIGTERM, then SIGKILL after a grace period); ``rows`` holds the
    points that had finished, in grid order, as :func:`sweep` returns them."""

    def __init__(self, rows):
        super().__init__("sweep interrupted: %d point(s) had finished (see .rows)" % len(rows))
        self.rows = rows


_BY_STATUS = {1: InternalError, 2: UsageError, 3: ConfigError, 4: ModelError, 5: CheckError,
              6: ResourceError, 7: OutputError}

# "error: FILE:LINE[:COL]: KEY: what", "error: --set KEY: what" or "error: --set: KEY: what"
# (docs/errors.md).
_LOCATED = re.compile(r"^(?P<file>[^:]+):(?P<line>\d+)(?::\d+)?: (?:(?P<key>[A-Za-z_][\w.\[\]]*): )?")
_SET = re.compile(r"^--set:? (?P<key>[A-Za-z_][\w.\[\]]*): ")


def binary():
    """The path of the ipusim executable this package runs."""
    path = os.environ.get("IPUSIM_BINARY")
    if path:
        return path
    try:
        from ipusim import _build  # written by CMake into the build tree's copy
        if os.path.exists(_build.BINARY):
            return _build.BINARY
    except ImportError:
        pass
    found = shutil.which("ipusim")
    if found:
        return found
    raise FileNotFoundError("no ipusim executable: build it (tools/build.sh) or set IPUSIM_BINARY")


def _error(command, status, stderr):
    lines = [l for l in stderr.splitlines() if l.startswith("error: ")]
    message = lines[-1][len("error: "):] if lines else (stderr.strip() or f"exit status {status}")
    file = line = key = None
    m = _LOCATED.match(message)
    if m:
        file, line, key = m.group("file"), int(m.group("line")), m.group("key")
    else:
        m = _SET.match(message)
        if m:
            file, key = "--set", m.group("key")
    cls = _BY_STATUS.get(status, IpusimError)
    return cls(message, status, command, file=file, line=line, key=key)


# Seconds a child has to stop after SIGTERM (ipusim removes its temporaries and exits with
# status 130) before it is killed.
_GRACE_SECONDS = 10


class _Children:
    """The child processes a call or a sweep is running, so that an interrupt stops them all:
    SIGTERM first, SIGKILL after the grace period. Once stopped, no new child starts."""

    def __init__(self):
        self._lock = threading.Lock()
        self._live = set()
        self.stopped = False

    def start(self, command, env):
        with self._lock:
            if self.stopped:
                raise KeyboardInterrupt("interrupted before the point started")
            child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     stdin=subprocess.DEVNULL, env=env)
            self._live.add(child)
            return child

    def done(self, child):
        with self._lock:
            self._live.discard(child)

    def stop(self):
        with self._lock:
            self.stopped = True
            live = list(self._live)
        for child in live:
            if child.poll() is None:
                child.send_signal(signal.SIGTERM)
        for child in live:
            try:
                child.wait(timeout=_GRACE_SECONDS)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()


def _decode(data):
    # ipusim's output is UTF-8; a path that is not (a file name in another encoding) must not
    # turn a result into a UnicodeDecodeError.
    return data.decode("utf-8", errors="replace")


def _call(args, children=None):
    command = [binary()] + [os.fspath(a) if isinstance(a, os.PathLike) else str(a) for a in args]
    env = dict(os.environ, SYSTEMC_DISABLE_COPYRIGHT_MESSAGE="1")
    own = children is None
    children = children or _Children()
    child = children.start(command, env)
    try:
        out, err = child.communicate()
    except BaseException:  # KeyboardInterrupt: stop the child as the shell would, then re-raise
        if own:
            children.stop()
        raise
    finally:
        children.done(child)
    if child.returncode != 0:
        raise _error(command, child.returncode, _decode(err))
    return _decode(out)


def _text(value, what):
    if value is None:
        raise TypeError(f"{what}: None is not a value (leave the key out to keep the config's)")
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)


def _sets(values):
    out = []
    for key, value in (values or {}).items():
        out.append(f"--set={key}={_text(value, f'set[{key!r}]')}")
    return out


def _option(flag, value):
    # "--flag=VALUE": a value that begins with '-' is never read as an option.
    return [f"{flag}={os.fspath(value)}"] if value else []


def _table(path):
    if not os.path.exists(path):
        return None
    try:
        import pandas
        return pandas.read_csv(path)
    except ImportError:
        with open(path, newline="") as f:
            return list(csv.DictReader(f))


_TABLES = ("layers", "tiles", "plan", "supersteps")


def compile(run, out, model=None, system=None, set=None, plan_cache=True):
    """Lowers a run config (``run.*``, ``chip.*`` and system keys in ``set``) to the trace
    ``out`` (.itb binary, .trace text) and returns ``out``. ``plan_cache=False`` searches every
    plan again (``--no-plan-cache``; the same trace)."""
    args = ["compile", *_option("--run", run), *_option("--out", out), *_option("--model", model),
            *_option("--system", system), *_no_plan_cache(plan_cache)]
    _call(args + _sets(set))
    return out


def _no_plan_cache(plan_cache):
    return [] if plan_cache else ["--no-plan-cache"]


def run(run=None, trace=None, model=None, system=None, chip=None, set=None, out=None,
        options=(), plan_cache=True):
    """Simulates a run config (compiled in the same child process), a compiled ``trace``, or
    a ``model`` on a ``system`` with no run config (a run is chosen for it: stats["chosen"]
    says how), and returns stats.json as a dict, with its run directory's tables under "layers",
    "tiles", "plan" and "supersteps". ``set`` maps keys to values (``{"chip.tiles": 1024}``);
    ``out`` keeps the run directory there (else a temporary one is removed); ``options``
    are further command-line options (``["--engine", "reference"]``); ``plan_cache=False``
    searches every plan again (``--no-plan-cache``; the same results)."""
    return _simulate(run, trace, model, system, chip, set, out,
                     [*options, *_no_plan_cache(plan_cache)])


def _simulate(run, trace, model, system, chip, set, out, options, children=None):
    if run is not None and trace is not None:
        raise ValueError("give one of run= (a run config) or trace= (a compiled trace), not both")
    if run is None and trace is None and (model is None or system is None):
        raise ValueError("give one of run= (a run config), trace= (a compiled trace), or model= "
                         "with system= (a run chosen for the model on that system)")
    directory = out or tempfile.mkdtemp(prefix="ipusim-")
    try:
        args = ["run", "-q", *_option("--out", directory)]
        for flag, value in (("--run", run), ("--model", model), ("--system", system),
                            ("--chip", chip)):
            args += _option(flag, value)
        args += _sets(set) + list(options)
        if trace:
            args += ["--", trace]  # after "--": a file name is never read as an option
        _call(args, children)
        with open(os.path.join(directory, "stats.json"), encoding="utf-8", errors="replace") as f:
            stats = json.load(f)
        for name in _TABLES:
            table = _table(os.path.join(directory, name + ".csv"))
            if table is not None:
                stats[name] = table
        return stats
    finally:
        if out is None:
            shutil.rmtree(directory, ignore_errors=True)


def _progress(done, total, label, stream):
    width = 30
    filled = width * done // total
    line = f"sweep [{'#' * filled}{'.' * (width - filled)}] {done}/{total} {label}"
    stream.write("\r" + line[:110].ljust(110))
    stream.write("\n" if done == total else "")
    stream.flush()


def sweep(grid, run=None, trace=None, model=None, system=None, chip=None, set=None,
          progress=True, jobs=None, options=(), plan_cache=True):
    """Runs every point of ``grid`` (a dict of key -> list of values; their product) with
    :func:`run`, each in its own process, ``jobs`` at a time (default: the machine's CPUs),
    showing progress on stderr. Returns one row per point in grid order (a DataFrame with
    pandas, else a list of dicts): the point's values, step_time (s), throughput and its unit,
    peak tile memory (B), and error (the message of a point that failed; the others still
    run, as ``ipusim sweep`` does). ``options`` are further options of every point's run;
    ``plan_cache=False`` adds ``--no-plan-cache``.
    Ctrl-C cancels the points not started, stops the running ones (SIGTERM, then SIGKILL) and
    raises :class:`SweepInterrupted`, whose ``rows`` are the finished points."""
    keys = list(grid)
    for k in keys:
        values = grid[k]
        if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
            raise TypeError(f"grid[{k!r}]: expected a list of values, found the "
                            f"{type(values).__name__} {values!r} (write [{values!r}])")
    points = [dict(zip(keys, values))
              for values in itertools.product(*(list(grid[k]) for k in keys))]
    for point in points:
        _sets({**(set or {}), **point})  # a None value is refused before anything runs
    children = _Children()
    options = [*options, *_no_plan_cache(plan_cache)]

    def one(point):
        row = dict(point)
        try:
            stats = _simulate(run, trace, model, system, chip, {**(set or {}), **point}, None,
                              options, children)
            throughput = stats.get("workload", {}).get("throughput", {})
            row.update(step_time=stats["total"]["time"]["value"],
                       throughput=throughput.get("value"),
                       throughput_unit=throughput.get("unit"),
                       peak_tile_memory=max(i["tiles"]["memory"]["max"] for i in stats["ipu"]),
                       error=None)
        except (IpusimError, OSError, ValueError) as e:
            # One point's failure (a config error, an unreadable result) is its row's error;
            # the other points still run.
            row.update(step_time=None, throughput=None, throughput_unit=None,
                       peak_tile_memory=None, error=getattr(e, "message", str(e)))
        return row

    rows = [None] * len(points)
    workers = max(1, min(jobs or os.cpu_count() or 1, len(points)))
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=workers)
    try:
        running = {pool.submit(one, p): i for i, p in enumerate(points)}
        for done, future in enumerate(concurrent.futures.as_completed(running), 1):
            i = running[future]
            rows[i] = future.result()
            if progress:
                label = " ".join(f"{k}={_text(v, k)}" for k, v in points[i].items())
                _progress(done, len(points), "done" if done == len(points) else label,
                          sys.stderr)
    except KeyboardInterrupt:
        # Cancel the points not started, stop the running ones, keep the finished ones.
        pool.shutdown(wait=False, cancel_futures=True)
        children.stop()
        pool.shutdown(wait=True)
        if progress:
            sys.stderr.write("\n")
        raise SweepInterrupted(_rows([r for r in rows if r is not None])) from None
    pool.shutdown(wait=True)
    return _rows(rows)


def _rows(rows):
    try:
        import pandas
        return pandas.DataFrame(rows)
    except ImportError:
        return rows


def compare(a, b):
    """``ipusim compare A B --json``: the differences between two run directories (kept with
    ``run(..., out=DIR)``), as a dict (docs/reports.md)."""
    return json.loads(_call(["compare", "--json", "--", a, b]))
