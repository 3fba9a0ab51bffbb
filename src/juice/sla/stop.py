"""``runner: {stop_on_sla: true}``: end a run's load as soon as a criterion can no longer pass
(Rally's ``--abort-on-sla-failure``), keeping every iteration so far.

Only criteria decided monotonically while the run goes stop it: once crossed, no iteration
still to come can bring them back.

===============================  ==========================================================
criterion                        stops when
===============================  ==========================================================
``failure_rate: {max: M}``       failed iterations × 100 / planned iterations > M (planned:
                                 ``runner.times`` × drivers; the final rate can only be
                                 higher: fewer iterations, same failures)
``success_pct: {min: M}``        100 − that < M
``max_seconds_per_iteration``    one iteration (failed ones included, as Rally) lasts longer
===============================  ==========================================================

The others (means, percentiles, outliers, performance_degradation, ``failure_rate.min``) can
move both ways until the last iteration: they are judged after the run as usual. With
``confidence`` the judgement after the run is stricter still, so a stopped run fails it too.

Each driver applies the rule to its own iterations (the limits are the whole run's: more
failures than the run may have in one driver is enough); other drivers finish their load.

    rule = stop_rule(spec.sla, planned=times * drivers)     # None: nothing can stop the run
    RunnerSpec(..., stop=rule)
    manifest["sla_stopped"] = stopped(results)               # {"criterion", "at_iteration", ...}
"""

from __future__ import annotations

from collections.abc import Sequence

from juice.load.api import LoadResult
from juice.load.engine import StopRule
from juice.sla.criteria import Sla

CRITERION = {"max_error_pct": "failure_rate", "min_success_pct": "success_pct",
             "max_duration_s": "max_seconds_per_iteration"}


def stop_rule(sla: Sla, planned: int) -> StopRule | None:
    """The engine's rule for ``sla`` over ``planned`` iterations (None when no criterion of
    ``sla`` can be decided before the end)."""
    fr = sla.failure_rate
    rule = StopRule(planned=planned,
                    max_error_pct=float(fr.max) if fr is not None and fr.max is not None else None,
                    min_success_pct=float(sla.success_pct.min) if sla.success_pct is not None else None,
                    max_duration_s=(float(sla.max_seconds_per_iteration)
                                    if sla.max_seconds_per_iteration is not None else None))
    if rule.max_error_pct is None and rule.min_success_pct is None and rule.max_duration_s is None:
        return None
    return rule


def stopped(results: Sequence[LoadResult]) -> dict[str, object] | None:
    """The manifest's ``sla_stopped``: the first driver whose load a criterion stopped (by
    iterations done), or None."""
    hits = [(r.stopped, r.site) for r in results if r.stopped]
    if not hits:
        return None
    hit, site = min(hits, key=lambda h: int(h[0].get("done") or 0))
    return {"criterion": CRITERION.get(str(hit.get("limit")), str(hit.get("limit"))),
            "at_iteration": hit.get("at_iteration"), "iterations_done": hit.get("done"),
            "site": site, "drivers_stopped": len(hits)}
