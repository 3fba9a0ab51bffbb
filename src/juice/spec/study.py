"""What every study's spec shares, declared once: :class:`StudySpec` (and
:class:`TargetStudySpec` for a study that can also measure an existing cloud).

A study's spec derives from it with its SLA model as the type parameter and declares only its
own fields (its axes, its runner, its lab)::

    class MySpec(StudySpec[MySla]):
        workload: Literal["mine"]            # the study's name (juice.studies); the one field
                                             # every study narrows
        delay_ms: list[OneWayMs] = ...       # its own fields
        WAN_INTO: ClassVar[str | None] = "delay_ms"   # wan: {delay_ms: [...]} lands there

        def lab_sites(self) -> int | None:   # the sites its lab needs (provider: checks them)
            return self.sites

The shared fields (their order in a dump: these first, then the study's own):

================  ===============================================================================
``workload``      the study (juice.studies); each study narrows it to ``Literal["<name>"]``
``name``          letters, digits, _.- (at most 64); required unless a study gives a default
``description``   free text, at most 2,000 characters; identity only (never in a run key)
``seed``          0..2**31-1, default 1: every random draw of a run derives from it
``repetitions``   1..1,000, default 1 (a study may bound it lower or give it another default:
                  it overrides the field, and says so in its module doc)
``sla``           pass/fail criteria after every run: the study's :class:`juice.sla.criteria.Sla`
                  subclass, the type parameter
``provider``      where the sites run (juice.lab.provider); checked against :meth:`lab_sites`
``target``        :class:`TargetStudySpec` only: an existing cloud instead of a lab
================  ===============================================================================

and the ``wan:`` section: a study whose WAN is uniform one-way delays sets ``WAN_INTO`` (and
``WAN_SINGLE``) and accepts ``wan: {delay_ms: [...]}`` (juice.spec.wan.uniform_delays); a
study with a richer WAN declares its own ``wan`` field and leaves ``WAN_INTO`` None.

Not here, because the studies' forms differ and a common form would change what runs store:
``runner`` (each study's own model; the sweep's options ``order`` and ``warmup_runs`` are
declared with :data:`juice.sweep.order.ORDER_DOC` and :func:`juice.spec.warmup.field`),
``profile``, ``faults`` and ``results`` (Keystone and nova only).
"""

from __future__ import annotations

from typing import Any, ClassVar, Generic, TypeVar, get_args

from pydantic import Field, model_validator

from juice.lab.provider import Provider, hosts_fit
from juice.sla.criteria import SLA_FIELD_DOC, Sla
from juice.spec import warmup as spec_warmup
from juice.spec.base import NAME_RE, Repetitions, Seed, Strict, StrictStr
from juice.spec.target import Target
from juice.spec.wan import uniform_delays

SlaT = TypeVar("SlaT", bound=Sla)

NAME_DOC = "letters, digits, _.- (at most 64)"
DESCRIPTION_DOC = "free text, at most 2,000 characters (not in any run key)"
SEED_DOC = "0..2**31-1: every random draw of a run derives from it (e.g. repetition r uses seed + r)"
REPETITIONS_DOC = "1..1,000"
PROVIDER_DOC = "where the sites run: local namespaces (default) or hosts through EnOSlib (juice.lab.provider)"
TARGET_DOC = ("an existing cloud instead of a lab (juice.spec.target): no lab, no deployment; the "
              "study's doc says what else it needs")


def _empty() -> Any:
    """The default of ``sla``: no criterion (``{}``, validated into the study's SLA model: the
    field's type is the study's, this function cannot name it)."""
    return {}


class StudySpec(Strict, Generic[SlaT]):
    """The fields and checks every study's spec shares (see the module doc)."""

    # wan: {delay_ms: [...]} is moved to this (dotted) field before validation; None: the study
    # declares its own ``wan`` field (or has none)
    WAN_INTO: ClassVar[str | None] = None
    # the study runs at one delay: wan.delay_ms must list exactly one
    WAN_SINGLE: ClassVar[bool] = False

    workload: StrictStr = Field(description="the study (juice.studies)")
    name: StrictStr = Field(pattern=NAME_RE, description=NAME_DOC)
    description: StrictStr = Field(default="", max_length=2000, description=DESCRIPTION_DOC)
    seed: Seed = Field(default=1, description=SEED_DOC)
    repetitions: Repetitions = Field(default=1, description=REPETITIONS_DOC)
    sla: SlaT = Field(default_factory=_empty, validate_default=True, description=SLA_FIELD_DOC)
    provider: Provider = Field(default_factory=Provider, description=PROVIDER_DOC)

    @classmethod
    def study_name(cls) -> str:
        """The study's name: the value its ``workload`` field accepts."""
        names = get_args(cls.model_fields["workload"].annotation)
        return str(names[0]) if names else cls.__name__

    def lab_sites(self) -> int | None:
        """The most sites a lab of this spec has (``provider`` must hold them); None: no lab
        (e.g. against a target) or nothing to check."""
        return None

    @model_validator(mode="before")
    @classmethod
    def _wan(cls, data: object) -> object:
        """``wan: {delay_ms: ...}``, the WAN section every study accepts (juice.spec.wan)."""
        if cls.WAN_INTO is None:
            return data
        return uniform_delays(data, cls.study_name(), into=cls.WAN_INTO, single=cls.WAN_SINGLE)

    @model_validator(mode="after")
    def _provider_fits(self) -> StudySpec[SlaT]:
        sites = self.lab_sites()
        if sites is not None:
            hosts_fit(self.provider, sites, self.study_name())
        return self


class TargetStudySpec(StudySpec[SlaT], Generic[SlaT]):
    """A study that measures its own labs or an existing cloud (``target:``). A ``runner``
    with ``warmup_runs`` defaults to 0 against a target and refuses any other value there
    (juice.spec.warmup)."""

    target: Target | None = Field(default=None, description=TARGET_DOC)

    @model_validator(mode="before")
    @classmethod
    def _no_warmup_run_on_a_target(cls, data: object) -> object:
        return spec_warmup.zero_against_target(data)

    @model_validator(mode="after")
    def _warmup_on_target(self) -> TargetStudySpec[SlaT]:
        warmup_runs = getattr(getattr(self, "runner", None), "warmup_runs", 0)
        spec_warmup.check_target(self.target is not None, int(warmup_runs))
        return self
