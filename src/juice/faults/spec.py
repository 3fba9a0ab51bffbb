"""Fault schedules: what goes wrong during a run, and when (a spec section any study can use).

    faults:
      - {at_s: 20, partition: 3, duration_s: 20}          # cut site 3 off 20 s in, heal 20 s later
      - {at_iteration: 200, kill: galera, site: 2, restart_after_s: 10}   # kill -9, restart 10 s later
      - {at_s: 30, wan: {delay_ms: 100, loss_pct: 1}, duration_s: 15}   # change the WAN, restore it after

Each event starts either ``at_s`` seconds after the measured window starts or when
``at_iteration`` iterations (all drivers together, failed ones included) have finished:
exactly one of the two. Its action is exactly one of ``partition`` (a site number),
``kill`` (a server kind of the deployment: ``galera``, ``mariadb``, ``postgres``, ``keystone``,
``memcached``, later brokers; with the ``site`` whose server dies) or ``wan`` (new one-way delay,
jitter and/or loss for every pair). A partition and a WAN change last ``duration_s`` (then
healed / restored); a killed server is restarted ``restart_after_s`` after its death when
given, else it stays dead until the deployment is torn down. Whatever happens to the run —
success, failure, Ctrl-C — partitions are healed and the WAN restored when it ends.

Bounds: times 0..86,400 s (a day), iteration counts 0..10,000,000, one-way delays 0..10,000 ms,
loss 0..100 %; at most 100 events per spec.
"""

from __future__ import annotations

from pydantic import Field, model_validator

from juice.spec.base import Strict

MAX_S = 86_400.0


class WanChange(Strict):
    """New WAN settings for every pair (unset fields keep their value)."""

    delay_ms: float | None = Field(default=None, ge=0, le=10_000, allow_inf_nan=False,
                                   description="one-way delay between every pair of sites")
    jitter_ms: float | None = Field(default=None, ge=0, le=10_000, allow_inf_nan=False)
    loss_pct: float | None = Field(default=None, ge=0, le=100, allow_inf_nan=False)

    @model_validator(mode="after")
    def _something(self) -> WanChange:
        if self.delay_ms is None and self.jitter_ms is None and self.loss_pct is None:
            raise ValueError("give delay_ms, jitter_ms and/or loss_pct")
        return self


class Fault(Strict):
    """One event of a fault schedule (see the module doc)."""

    at_s: float | None = Field(default=None, ge=0, le=MAX_S, allow_inf_nan=False,
                               description="seconds after the measured window starts")
    at_iteration: int | None = Field(default=None, ge=0, le=10_000_000,
                                     description="when this many iterations have finished")
    partition: int | None = Field(default=None, ge=1, le=250, description="the site cut off")
    kill: str | None = Field(default=None, pattern=r"^[a-z][a-z0-9-]{0,31}$",
                             description="the kind of server killed (SIGKILL)")
    site: int | None = Field(default=None, ge=1, le=250, description="where the killed server runs")
    wan: WanChange | None = None
    duration_s: float | None = Field(default=None, gt=0, le=MAX_S, allow_inf_nan=False,
                                     description="how long a partition or WAN change lasts")
    restart_after_s: float | None = Field(default=None, ge=0, le=MAX_S, allow_inf_nan=False,
                                          description="restart a killed server this long after")

    @model_validator(mode="after")
    def _consistent(self) -> Fault:
        if (self.at_s is None) == (self.at_iteration is None):
            raise ValueError("give exactly one of at_s and at_iteration")
        actions = [a for a in ("partition", "kill", "wan") if getattr(self, a) is not None]
        if len(actions) != 1:
            raise ValueError("give exactly one action: partition, kill or wan")
        if self.kill is not None:
            if self.site is None:
                raise ValueError("kill: say which site's server dies (site: N)")
            if self.duration_s is not None:
                raise ValueError("kill: use restart_after_s (duration_s is for partition and wan)")
        else:
            if self.site is not None or self.restart_after_s is not None:
                raise ValueError("site and restart_after_s belong to kill events")
            if self.duration_s is None:
                raise ValueError(f"{actions[0]}: give duration_s (how long it lasts)")
        return self

    @property
    def action(self) -> str:
        return "partition" if self.partition is not None else "kill" if self.kill is not None else "wan"

    def describe(self) -> str:
        when = f"at {self.at_s:g} s" if self.at_s is not None else f"at iteration {self.at_iteration}"
        if self.partition is not None:
            what = f"partition site {self.partition} for {self.duration_s:g} s"
        elif self.kill is not None:
            again = (f", restart after {self.restart_after_s:g} s" if self.restart_after_s is not None
                     else ", no restart")
            what = f"kill {self.kill} in site {self.site}{again}"
        else:
            assert self.wan is not None
            parts = [f"{k}={v:g}" for k, v in self.wan.model_dump().items() if v is not None]
            what = f"WAN {', '.join(parts)} for {self.duration_s:g} s"
        return f"{when}: {what}"


def check_sites(faults: list[Fault], sites: int, where: str = "faults") -> None:
    """ValueError naming ``where.<i>`` when an event names a site the lab does not have."""
    for i, f in enumerate(faults):
        for s in (f.partition, f.site):
            if s is not None and s > sites:
                raise ValueError(f"{where}.{i}: site {s} does not exist (the lab has {sites} sites)")
