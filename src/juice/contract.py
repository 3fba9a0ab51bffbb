"""The study contract: what a study supplies so that ``juice plan``, ``run``, ``report`` and
``analyze`` can drive it without knowing its name.

It sits below the runner and the instruments (``juice.sweep``, ``juice.report``): they drive
any study through it and never import one. ``juice.contract`` re-exports it (studies written
against that name keep working).

A study is one package ``juice/studies/<name>/`` whose ``__init__`` exposes ``STUDY``, an
instance of a :class:`Study` subclass, plus one line in ``juice.studies.BUILTIN`` (third-party
studies use the ``juice.studies`` entry-point group instead). Its pieces::

    name = "messaging"                      # the spec's `workload:` value
    parse(data, source) -> Spec             # strict model; UserError "<file>: <field>: <why>"
    expand(spec) -> [Point]                 # every run, in execution order, stable keys
    lab(spec, points)        -> context manager yielding the lab the points share (a
                                 ``juice.lab.place.Lab``: namespaces here or SSH hosts; None
                                 for an existing cloud)
    deployment(spec, lab, points) -> context manager yielding the servers they share (the
                                 study's own type: the third type parameter, ``D``)
    run_point(run, deployment)              # writes the run's files into run.rd
    preflight(spec, points, yes), dry_run(spec, points), cleanup(spec, prefix)   # optional
    profile_sources(deployment)             # optional: the services a resource profile names
    plan_columns(point), estimate_s(point), overhead_s(points)
    summary_lines(study_dir), report_sections(inputs), analyze(paths, by)
    profile_level                           # the resource profile's load levels (a parameter)

A point (see :class:`Point`) is frozen data with a ``key`` (a hash of every parameter that
changes what is measured: stored in the run's manifest, never derived from a directory name),
a ``dirname`` prefix for humans, and the ``lab_key`` / ``deployment_key`` that group
consecutive points onto shared infrastructure: the runner (``juice.sweep.sweep``) opens one
lab per run of equal ``lab_key`` and inside it one deployment per run of equal
``deployment_key``, so ``expand`` orders points so that equal keys are adjacent. Anything finer
(e.g. changing the WAN of a running lab, growing a table) is the deployment object's own state,
used by ``run_point``.

Results: every run is a ``RunDir`` (complete or ``.failed``, never half-written). ``run_point``
calls ``run.manifest(**fields)`` (which adds ``workload`` and ``run_key``) at least once;
``key_of(manifest)`` recognises a complete run of this study, so results written by an
earlier version keep counting as done when the study overrides it for their layout.

Example, a study that times ``true`` in a site (see ``tests/studies/test_contract.py``)::

    class Toy(Study[ToySpec, ToyPoint, LocalLab]):
        name = "toy"
        title = "Toy"
        def parse(self, data, source): return validate(ToySpec, data, source, expected="...")
        def expand(self, spec): return [ToyPoint(n) for n in spec.sizes]
        def lab(self, spec, points, progress): return LocalLab.up(..., ephemeral=True)
        def deployment(self, spec, lab, points, progress): return nullcontext(lab)
        def run_point(self, run, dep): run.manifest(params=...); run.rd.write_json(...)
        def plan_columns(self, p): return {"size": p.size}
        def estimate_s(self, p): return 1.0
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Hashable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Protocol

from typing_extensions import TypeVar

if TYPE_CHECKING:
    import pandas as pd

    from juice.lab.place import Lab
    from juice.load.api import Scenario
    from juice.load.progress import ProgressUI
    from juice.profile.clocks import Clocks
    from juice.results.store import RunDir

Progress = Callable[[str], None]


class SpecLike(Protocol):
    """What the runner reads of every study's spec."""

    @property
    def name(self) -> str: ...


class Point(Protocol):
    """One run of a study (frozen data)."""

    @property
    def key(self) -> str:
        """Stable identity: a hash of the parameters (stored as the manifest's ``run_key``)."""
        ...

    @property
    def dirname(self) -> str:
        """Directory name prefix (a timestamp is appended); for humans, never parsed back."""
        ...

    @property
    def label(self) -> str:
        """One line for progress messages."""
        ...

    @property
    def lab_key(self) -> Hashable:
        """Adjacent points with equal ``lab_key`` share one lab."""
        ...

    @property
    def deployment_key(self) -> Hashable:
        """Adjacent points (in one lab) with equal ``deployment_key`` share one deployment."""
        ...


S = TypeVar("S", bound=SpecLike)
P = TypeVar("P", bound=Point)
# the deployment a study yields and its runs get (its own type; unchecked when left out, for
# code that drives any study: ``Study[Any, Any]``)
D = TypeVar("D", default=Any)
# what a spec file, a manifest or a JSON document holds, read before validation
Data = Mapping[str, object]


@dataclass
class Run(Generic[S, P]):
    """What ``run_point`` gets: the point, its (partial) run directory and the context."""

    workload: str
    spec: S
    point: P
    rd: RunDir
    spec_data: Data  # the spec as read from its file (stored in manifests)
    spec_text: str
    progress: Progress
    ui: ProgressUI | None = None
    # each site's clock against Juice's at the run's start (``juice.profile.clocks``): to
    # correct times taken on different hosts; None without a lab
    clocks: Clocks | None = None

    def manifest(self, **fields: object) -> None:
        """Write (or rewrite) the run's manifest.json with ``workload`` and ``run_key``."""
        self.rd.manifest(workload=self.workload, run_key=self.point.key, **fields)


@dataclass(frozen=True)
class ReportInput:
    """What a report section reads: the paths the user gave (results directories, run
    directories, Rally JSON files) and the report options."""

    paths: list[Path]
    out_html: Path
    filter_q: float | None = 0.95
    params: Data = field(default_factory=dict)  # fill-ins for imported Rally files


class Study(ABC, Generic[S, P, D]):
    """Base class of every study. See the module doc for the contract."""

    name: ClassVar[str]          # the spec's ``workload:`` value
    title: ClassVar[str]         # a few words for tables and reports
    example: ClassVar[str] = ""  # an example spec (relative to the clone) for error hints

    # ---- spec and points -------------------------------------------------------------------

    @abstractmethod
    def parse(self, data: Data, source: str) -> S:
        """The strict spec model; UserError (exit 2) naming ``source`` and the field."""

    @abstractmethod
    def expand(self, spec: S) -> list[P]:
        """Every run of ``spec`` in execution order (equal lab/deployment keys adjacent)."""

    def results_dir(self, spec: S) -> Path:
        """Where the study's runs go unless ``--results`` says otherwise."""
        return Path("results") / spec.name

    def key_of(self, manifest: Data) -> str | None:
        """The run key of a complete run of this study, None when the manifest is not one.
        Override to also recognise manifests written before ``run_key`` existed."""
        key = manifest.get("run_key")
        return str(key) if manifest.get("workload") == self.name and key else None

    # ---- infrastructure and runs -----------------------------------------------------------

    @abstractmethod
    def lab(self, spec: S, points: Sequence[P], progress: Progress) -> AbstractContextManager[Lab | None]:
        """The lab shared by ``points`` (equal ``lab_key``); removed when the block exits.
        None: the points need no lab (they measure a cloud that exists)."""

    @abstractmethod
    def deployment(self, spec: S, lab: Lab | None, points: Sequence[P],
                   progress: Progress) -> AbstractContextManager[D]:
        """The servers shared by ``points`` (equal ``deployment_key``), stopped on exit."""

    @abstractmethod
    def run_point(self, run: Run[S, P], deployment: D) -> None:
        """Measure ``run.point`` into ``run.rd``; call ``run.manifest(...)``. Raise a JuiceError
        for a failed run (kept as ``.failed``; the sweep goes on)."""

    def preflight(self, spec: S, points: Sequence[P], assume_yes: bool) -> None:
        """Checks before anything is started or contacted (``juice run``); UserError refuses the
        run. ``assume_yes``: the user passed ``--yes`` (e.g. to write into a cloud that is not a
        Juice lab)."""

    def dry_run(self, spec: S, points: Sequence[P], progress: Progress) -> list[str] | None:
        """``juice run --dry-run``: what the runs would do (lines to print), without doing it.
        None: this study has no dry run."""
        return None

    def cleanup(self, spec: S, prefix: str | None, progress: Progress) -> list[str] | None:
        """``juice cleanup --target SPEC``: delete what runs of ``spec`` left on the cloud it
        targets (names starting ``prefix``, default every Juice run's). None: nothing to do
        for this study or spec."""
        return None

    def profile_sources(self, deployment: D) -> Sequence[object]:
        """The services (objects with ``records() -> [ServerRecord]``) of ``deployment``: they
        name the processes of each run's resource profile (``juice.profile.sampler``) and give
        the database servers whose statement counters it reads. Default: every such object in
        the deployment, its attributes and their attributes."""
        from juice.services.base import services_in

        return services_in(deployment)

    # ---- plan --------------------------------------------------------------------------------

    @abstractmethod
    def plan_columns(self, point: P) -> dict[str, object]:
        """The point's row in ``juice plan`` (column -> value), the same columns for every point."""

    @abstractmethod
    def estimate_s(self, point: P) -> float:
        """Seconds the run itself takes (rough)."""

    def overhead_s(self, points: Sequence[P]) -> float:
        """Seconds of set-up shared by ``points`` (labs, deployments, population)."""
        return 0.0

    # ---- results -----------------------------------------------------------------------------

    def summary_lines(self, study_dir: Path) -> list[str]:
        """What ``juice run`` prints after the sweep (e.g. fitted crossings)."""
        return []

    # the run parameter whose values are the load levels of the resource profile's peak table
    # (e.g. "concurrency"; "" = every run one level): read by the frame's profile section
    profile_level: ClassVar[str] = ""

    def report_sections(self, inputs: ReportInput) -> list[str]:
        """The study's own HTML fragments of the report (``juice.report.html`` helpers); [] when
        ``inputs`` hold none of this study's runs. The frame adds the shared sections around
        them from what the runs hold (``juice.report.shared``: SLA, run order, faults, servers'
        errors, traces, resource profile, server settings): a study never adds those."""
        return []

    def analyze(self, paths: Sequence[Path], by: Sequence[str], params: Data,
                filter_q: float | None) -> pd.DataFrame | None:
        """``juice analyze``'s table for this study's runs under ``paths`` (None: none of them).
        ``by``: extra grouping parameters (UserError when unknown); ``params``: fill-ins for
        imported files; ``filter_q``: drop iterations above this quantile, where that means
        something. ``table.attrs["note"]`` may say what was read or skipped."""
        return None

    def scenario(self, name: str, args: Data, contexts: Data | None,
                 seed: int | None) -> Scenario | None:
        """A load-engine scenario by name, for drivers (None: not one of this study's)."""
        return None
