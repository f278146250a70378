"""Grading a node, written once: input -> collect -> baseline -> (save the state) -> grade.

``ibdiag check``, ``collect``, ``report``/``check --from``, ``export``, ``serve`` and the Slurm
hooks (``ibdiag.cli.slurm``) all grade through a :class:`Pipeline`, made from one frozen
:class:`PipelineOptions` - what the command line said: where to read, the level, the
expectations (profile, config, --expect-*, --ignore-hca), the checks directories and the time
limits. ``Pipeline.prepare`` settles the thresholds and the registry once (``serve`` grades
with them on every scrape); ``run`` collects and grades; ``grade_snapshot`` grades a Snapshot
from elsewhere (a replayed bundle).

The input is chosen here too (:func:`grade`, what ``check`` and ``report`` call): this node
live, or a recording - a support bundle, or a saved report or snapshot JSON - graded offline
at the level it was taken at, with the thresholds it recorded unless expectations are given.

The baseline step: the baseline file, when given, is read before grading (a file that cannot
be used is a node-level problem the ``counters.baseline`` check warns about, never an error);
the save path, when given, receives this run's Snapshot *before* it is graded, so a state file
that cannot be written is a result too (NHC and Slurm discard stderr on success). Models are
frozen: each step hands the next a new Snapshot.

No click here: a setting or input that cannot be used raises an ``IbdiagError`` (one line:
:class:`SetupError`, or the config's, registry's or bundle's own), which the command line
prints and exits 3 for.
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

from ibdiag.errors import IbdiagError
from ibdiag.model import Report, Snapshot
from ibdiag.runner.watchdog import DEFAULT_READ_TIMEOUT_S
from ibdiag.thresholds import Thresholds

if TYPE_CHECKING:  # annotations only: each loads when used
    from ibdiag.config import Effective
    from ibdiag.counters.baseline import Loaded
    from ibdiag.registry import Registry
    from ibdiag.sources.sysfs import Recording


class SetupError(IbdiagError):
    """A bad --expect-hcas value, an unreadable checks directory, or a recording (bundle, saved
    report) that cannot be graded: one line."""


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
    history_path: Optional[str] = None  # the history store (None: ibdiag.history.store_path's)
    no_history: bool = False  # neither read nor write it
    # a monitor in this process (serve's sampler) records the samples: a run only reads the window
    history_sampled: bool = False
    # ibdiag collect: the support catalogue too (its files at every level, its commands from
    # level standard on), and the node's root file system for its files under /etc
    support: bool = False
    rootfs: str = "/"

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

    --ignore-hca adds to the patterns the profile and config set; the other flags replace.
    A bad profile, config file or flag: ``ConfigError`` (or ``SetupError``)."""
    from ibdiag.config import load_effective

    count, names = _expected_hcas(options.expect_hcas)
    flags: Dict[str, object] = {
        "expect_hcas": count,
        "expect_hca_names": names,
        "expect_rate_gbps": options.expect_rate,
    }
    if options.ignore_hcas:  # added to what the profile and config ignore: read those first
        layered = load_effective(options.profile, options.config_path, {})
        flags["ignore_hcas"] = [*layered.thresholds.ignore_hcas, *options.ignore_hcas]
    return load_effective(options.profile, options.config_path, flags)


def load_checks(checks_dirs: Tuple[str, ...] = ()) -> Registry:
    """Built-ins, entry points and the drop-in directories (default: the site's checks.d, when
    it exists), validated. A check that cannot be loaded: ``RegistryError``; a directory that
    cannot be read: ``SetupError``."""
    from ibdiag.registry import default_dropin_dir, load_registry

    default = default_dropin_dir()
    dirs = list(checks_dirs) or ([default] if os.path.isdir(default) else [])
    try:
        return load_registry(dirs)
    except OSError as exc:
        raise SetupError(str(exc)) from exc


class Pipeline:
    """Thresholds and checks settled for ``options``; ``run`` grades the node with them."""

    def __init__(self, options: PipelineOptions, thresholds: Thresholds, registry: Registry):
        self.options = options
        self.thresholds = thresholds
        self.registry = registry
        # what the level's checks read: only those sources are collected
        needs = {need for spec in registry.for_level(options.level) for need in spec.needs}
        if options.support:  # files at every level; commands (and the GPUs) from standard on
            needs |= {"sysfs", "support_files"}
            if options.level != "quick":
                needs |= {"support", "topology"}
        self.needs: AbstractSet[str] = frozenset(needs)

    @classmethod
    def prepare(cls, options: PipelineOptions) -> Pipeline:
        """Thresholds from ``effective_config``, checks from ``load_checks``; an
        ``IbdiagError`` when a setting cannot be used."""
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
            rootfs=self.options.rootfs if self.options.support else None,
        )

    def with_history(self, snapshot: Snapshot, source: str = "run") -> Snapshot:
        """``snapshot`` with its ports' past, when a check of the level reads it and history is
        not off: this run's sample goes into the store, the window comes back."""
        if "history" not in self.needs:
            return snapshot
        from ibdiag.history import DEFAULT_PATH, store_path

        options = self.options
        path = store_path(options.history_path, options.no_history, sysfs_root=options.sysfs_root)
        if path is None:
            return snapshot
        from ibdiag.history.record import record_and_read

        window = self.thresholds.flap_window_s
        chosen = path != DEFAULT_PATH or bool(options.history_path)  # by name, not by default
        return record_and_read(
            snapshot, path, window, source, record=not options.history_sampled, chosen=chosen
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
        """Collect, then the history (``with_history``), then ``grade_snapshot``: the node's
        Report."""
        snapshot = self.with_history(self.collect(recording, progress, runner_options))
        return self.grade_snapshot(snapshot, baseline_path, save_path, baseline=baseline)


class Input(NamedTuple):
    """What ``grade`` grades: ``recorded`` (a support bundle - tarball or directory - or a saved
    report or snapshot JSON) offline, or this node live when it is None."""

    recorded: Optional[str] = None
    baseline_path: Optional[str] = None  # grade counters on their change since this snapshot
    state_path: Optional[str] = None  # live: the previous run's snapshot, replaced by this one's
    accept_altered: bool = False  # a bundle whose files differ from its manifest: graded anyway


class Graded(NamedTuple):
    """A Report and the Pipeline that graded it (its checks say which failures hold a drain)."""

    report: Report
    pipeline: Pipeline


def grade(
    options: PipelineOptions,
    given: Input,
    progress: Optional[Callable[[str], None]] = None,
    warn: Optional[Callable[[str], None]] = None,
) -> Graded:
    """Grade what ``given`` names: a recording (``grade_recorded``; ``warn`` receives what is
    wrong with a bundle that can still be graded), else this node at the options' level.

    Live, counters are graded against ``baseline_path``; with ``state_path``, against the
    previous run's state when there is one (or a link to one), which this run's snapshot then
    replaces - before grading, so a state that cannot be saved is a result, not a stderr line.
    """
    if given.recorded is not None:
        return grade_recorded(
            given.recorded, options, given.baseline_path, given.accept_altered, warn
        )
    pipeline = Pipeline.prepare(options)
    baseline_path = given.baseline_path
    if given.state_path:
        baseline_path = given.state_path if os.path.exists(given.state_path) else None
    return Graded(pipeline.run(baseline_path, given.state_path, progress=progress), pipeline)


def grade_recorded(
    path: str,
    options: PipelineOptions,
    baseline_path: Optional[str] = None,
    accept_altered: bool = False,
    warn: Optional[Callable[[str], None]] = None,
) -> Graded:
    """Replay a bundle's raw files and outputs (or load a saved report or snapshot) and grade
    them with today's checks, at the level the recording was taken at.

    Thresholds: the recording's own, unless --profile, --config or expectation flags are given
    (then those, as for a live run). Counters: against ``baseline_path`` when given, else
    against the baseline the bundle stores (``collect --baseline``/``--state``), as the live
    run graded them. Missing and unlisted files of a bundle go to ``warn``; a bundle with
    altered files is refused unless ``accept_altered`` (``BundleError``), and then the Report
    names them. A recording that cannot be used at all is an ``IbdiagError``.
    """
    from pydantic import ValidationError

    from ibdiag.bundle.manifest import describe_validation_error

    registry = load_checks(options.checks_dirs)
    altered: List[str] = []
    stored_baseline = None
    if _is_saved_json(path):
        snapshot, level, recorded = _load_saved_json(path)
    else:
        replayed = _replay_bundle(path, accept_altered, warn)
        snapshot, level, recorded, altered, stored_baseline = replayed
    if options.expectations_given or recorded is None:
        thresholds = effective_config(options).thresholds
    else:
        try:
            thresholds = Thresholds.model_validate(recorded)
        except ValidationError as exc:
            raise SetupError(
                f"{path}: the thresholds it records are not valid: thresholds."
                f"{describe_validation_error(exc)} (grade it with --profile or --config)"
            ) from None
    pipeline = Pipeline(options._replace(level=level), thresholds, registry)
    report = pipeline.grade_snapshot(snapshot, baseline_path, baseline=stored_baseline)
    if altered:
        report = report.model_copy(update={"altered_files": altered})
    return Graded(report, pipeline)


def _replay_bundle(path: str, accept_altered: bool, warn: Optional[Callable[[str], None]]):
    """(snapshot, level, thresholds, altered files, the stored baseline or None) of a bundle."""
    from ibdiag.bundle.opener import open_bundle
    from ibdiag.bundle.replay import replay, replay_baseline

    with open_bundle(path, accept_altered=accept_altered) as opened:
        for warning in opened.warnings():
            if warn is not None:
                warn(warning)
        level, thresholds = opened.level or "quick", opened.thresholds
        altered = list(opened.altered)
        return replay(opened), level, thresholds, altered, replay_baseline(opened)


def _is_saved_json(path: str) -> bool:
    """A report or snapshot written as JSON (check -o F.json, ibdiag snapshot), not a bundle."""
    if not os.path.isfile(path):
        return False
    with open(path, "rb") as handle:
        return handle.read(64).lstrip().startswith(b"{")


def _load_saved_json(path: str):
    """(snapshot, level, thresholds) of a saved report, or of a bare snapshot (quick)."""
    import json

    from ibdiag.counters import baseline
    from ibdiag.registry import LEVELS

    snapshot, problem = baseline.load(path)
    if problem is not None or snapshot is None:
        raise SetupError(problem or f"{path}: not a snapshot")
    with open(path, "rb") as handle:
        data = json.loads(handle.read())
    if "results" in data:  # a report: grade as it was graded, unless told otherwise
        level = data.get("level") or "quick"
        if level not in LEVELS:
            raise SetupError(f"{path}: level {repr(level)[:40]} is not one of {', '.join(LEVELS)}")
        return snapshot, level, data.get("thresholds")
    return snapshot, "standard" if snapshot.commands else "quick", None


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
