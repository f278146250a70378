"""Grading a node, written once: collect -> baseline -> (save the state) -> grade.

``ibdiag check``, ``collect``, ``report``/``check --from``, ``export``, ``serve`` and the Slurm
hooks (``ibdiag.slurm.commands``) all grade through a :class:`Pipeline`, made from one frozen
:class:`PipelineOptions` - what the command line said: where to read, the level, the
expectations (profile, config, --expect-*, --ignore-hca), the checks directories and the time
limits. ``Pipeline.prepare`` settles the thresholds and the registry once (``serve`` grades
with them on every scrape); ``run`` collects and grades; ``grade_snapshot`` grades a Snapshot
from elsewhere (a replayed bundle).

The baseline step: the baseline file, when given, is read before grading (a file that cannot
be used is a node-level problem the ``counters.baseline`` check warns about, never an error);
the save path, when given, receives this run's Snapshot *before* it is graded, so a state file
that cannot be written is a result too (NHC and Slurm discard stderr on success). Models are
frozen: each step hands the next a new Snapshot.

No click here: a setting that cannot be used raises :class:`SetupError` (one line), which the
command line turns into its usage error (exit 3).
"""

from __future__ import annotations

import os
from typing import (
    TYPE_CHECKING,
    AbstractSet,
    Callable,
    Dict,
    List,
    NamedTuple,
    Optional,
    Tuple,
    Union,
)

from ibdiag.model import Report, Snapshot
from ibdiag.runner.watchdog import DEFAULT_READ_TIMEOUT_S
from ibdiag.thresholds import Thresholds

if TYPE_CHECKING:  # annotations only: each loads when used
    from ibdiag.config import Effective
    from ibdiag.counters.baseline import Loaded
    from ibdiag.registry import Registry
    from ibdiag.sources.sysfs import Recording


class SetupError(Exception):
    """A bad profile, config file, --expect-hcas value or checks directory: one line."""


class PipelineOptions(NamedTuple):
    """What a command line asks of a grading run (immutable; ``_replace`` makes a variant)."""

    level: str = "quick"  # quick, standard or full: which checks run, so which sources
    sysfs_root: str = "/sys"
    procfs_root: str = "/proc"
    profile: Optional[str] = None  # a shipped profile's name or a TOML file
    config_path: Optional[str] = None  # the site config (default: /etc/ibdiag/ibdiag.toml)
    expect_hcas: Optional[str] = None  # "8" (a count) or "mlx5_0,mlx5_1" (names)
    expect_rate: Optional[float] = None  # Gb/s every InfiniBand port must run at
    ignore_hcas: Tuple[str, ...] = ()  # globs, added to what the profile and config ignore
    checks_dirs: Tuple[str, ...] = ()  # drop-in directories (default: the site's checks.d)
    deadline_s: Optional[float] = None  # start no command after this (collect.DefaultSeconds
    command_timeout_s: Optional[float] = None  # when the user did not give it)
    read_timeout_s: Optional[float] = DEFAULT_READ_TIMEOUT_S  # a hung sysfs read (watchdog)

    @property
    def expectations_given(self) -> bool:
        """True when a profile, config or expectation flag was given: a bundle is then graded
        with these rather than the thresholds it recorded."""
        return any(
            (self.profile, self.config_path, self.expect_hcas, self.expect_rate, self.ignore_hcas)
        )


def _expected_hcas(value: Optional[str]) -> Tuple[Optional[int], List[str]]:
    """ "8" -> a count; "mlx5_0,mlx5_1" -> names that must all be present."""
    if value is None:
        return None, []
    value = value.strip()
    if value.isascii() and value.isdigit():  # "²" is a digit to isdigit(), not to int()
        return int(value), []
    names = [name.strip() for name in value.split(",") if name.strip()]
    if not names:
        raise SetupError(f"--expect-hcas {value!r}: give a count (8) or HCA names (mlx5_0,mlx5_1)")
    return None, names


def effective_config(options: PipelineOptions) -> Effective:
    """Profile, then site config, then flags: the thresholds to grade with, and who set what.

    --ignore-hca adds to the patterns the profile and config set; the other flags replace."""
    from ibdiag.config import ConfigError, load_effective

    count, names = _expected_hcas(options.expect_hcas)
    flags: Dict[str, object] = {
        "expect_hcas": count,
        "expect_hca_names": names,
        "expect_rate_gbps": options.expect_rate,
    }
    try:
        if options.ignore_hcas:  # added to what the profile and config ignore: read those first
            layered = load_effective(options.profile, options.config_path, {})
            flags["ignore_hcas"] = [*layered.thresholds.ignore_hcas, *options.ignore_hcas]
        return load_effective(options.profile, options.config_path, flags)
    except ConfigError as exc:
        raise SetupError(str(exc)) from exc


def load_checks(checks_dirs: Tuple[str, ...] = ()) -> Registry:
    """Built-ins, entry points and the drop-in directories (default: the site's checks.d, when
    it exists), validated."""
    from ibdiag.registry import RegistryError, default_dropin_dir, load_registry

    default = default_dropin_dir()
    dirs = list(checks_dirs) or ([default] if os.path.isdir(default) else [])
    try:
        return load_registry(dirs)
    except (RegistryError, OSError) as exc:
        raise SetupError(str(exc)) from exc


class Pipeline:
    """Thresholds and checks settled for ``options``; ``run`` grades the node with them."""

    def __init__(self, options: PipelineOptions, thresholds: Thresholds, registry: Registry):
        self.options = options
        self.thresholds = thresholds
        self.registry = registry
        # what the level's checks read: only those sources are collected
        self.needs: AbstractSet[str] = frozenset(
            need for spec in registry.for_level(options.level) for need in spec.needs
        )

    @classmethod
    def prepare(cls, options: PipelineOptions) -> Pipeline:
        """Thresholds from ``effective_config``, checks from ``load_checks``; SetupError."""
        return cls(options, effective_config(options).thresholds, load_checks(options.checks_dirs))

    def runner_options(self) -> Dict[str, float]:
        """The command runner's limits the options set (none given: the runner's own)."""
        limits = {
            "timeout_s": self.options.command_timeout_s,
            "deadline_s": self.options.deadline_s,
        }
        return {key: value for key, value in limits.items() if value is not None}

    def collect(
        self,
        recording: Optional[Recording] = None,
        progress: Optional[Callable[[str], None]] = None,
        runner_options: Optional[Dict[str, float]] = None,
    ) -> Snapshot:
        """Read the node (``ibdiag.collect.collect``) for this level's checks; a run's own
        ``runner_options`` (the Slurm hooks' shrinking deadline) replace the options' limits."""
        from ibdiag import collect

        return collect.collect(
            self.options.sysfs_root,
            self.options.procfs_root,
            self.needs,
            self.runner_options() if runner_options is None else runner_options,
            recording=recording,
            thresholds=self.thresholds,
            progress=progress,
            read_timeout=self.options.read_timeout_s,
        )

    def grade_snapshot(
        self,
        snapshot: Snapshot,
        baseline_path: Optional[str] = None,
        save_path: Optional[str] = None,
        *,
        baseline: Optional[Loaded] = None,
    ) -> Report:
        """Grade ``snapshot`` at the options' level, counters against ``baseline_path`` - or
        ``baseline``, one already read (``ibdiag.counters.baseline.Loaded``: a bundle's,
        collect's) - (why it cannot be used: a problem of the graded snapshot), after saving it to
        ``save_path``
        (why it cannot be saved: likewise)."""
        from ibdiag.grade import grade

        snapshot, previous = read_baseline(snapshot, baseline_path or baseline)
        if save_path is not None:
            snapshot = save_state(save_path, snapshot)
        return grade(snapshot, self.registry, self.thresholds, self.options.level, previous)

    def run(
        self,
        baseline_path: Optional[str] = None,
        save_path: Optional[str] = None,
        *,
        baseline: Optional[Loaded] = None,
        recording: Optional[Recording] = None,
        progress: Optional[Callable[[str], None]] = None,
        runner_options: Optional[Dict[str, float]] = None,
    ) -> Report:
        """Collect, then ``grade_snapshot``: the node's Report."""
        snapshot = self.collect(recording, progress, runner_options)
        return self.grade_snapshot(snapshot, baseline_path, save_path, baseline=baseline)


def read_baseline(
    snapshot: Snapshot, source: Union[str, Loaded, None]
) -> Tuple[Snapshot, Optional[Snapshot]]:
    """(snapshot, the baseline ``source`` names - a path, or one already read - or None): why
    it could not be used is a problem of the returned snapshot (``baseline``, which
    counters.baseline reports as one warning)."""
    if source is None:
        return snapshot, None
    from ibdiag.counters import baseline

    previous, problem = baseline.load(source) if isinstance(source, str) else source
    if problem is not None:
        snapshot = snapshot.with_problem(baseline.BASELINE_PROBLEM, problem)
    return snapshot, previous


def save_state(path: str, snapshot: Snapshot) -> Snapshot:
    """Save ``snapshot`` as the next run's baseline; the snapshot to grade (``snapshot``, or a
    new one naming why it could not be saved).

    The file's directory is created (0700) when its parent exists: the README's
    ``/var/lib/ibdiag/nhc-state.json`` works on a node where nothing made /var/lib/ibdiag yet.
    When the file cannot be written, why goes into the snapshot's ``problems`` and the
    ``counters.baseline`` check warns: NHC and Slurm discard stderr on success, and a state
    that silently never saves means counters are never graded on their change.
    """
    from ibdiag.counters import baseline

    directory = os.path.dirname(os.path.abspath(path))
    try:
        if not os.path.isdir(directory) and os.path.isdir(os.path.dirname(directory)):
            os.mkdir(directory, 0o700)
        baseline.save(path, snapshot)
    except OSError as exc:  # the verdict stands; the next run will have no baseline
        why = exc.strerror or str(exc)
        if not os.path.isdir(directory):
            why = f"its directory {directory} does not exist"
        return snapshot.with_problem(
            baseline.STATE_PROBLEM, f"cannot write state file {path}: {why}"
        )
    return snapshot
