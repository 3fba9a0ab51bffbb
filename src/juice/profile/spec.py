"""The ``profile:`` section every study's spec may carry: how often the resource sampler
(``juice.profile.sampler``) reads the processes and sites of a run.

    profile: {interval_s: 1.0}     # default 1 Hz; 0.1 s (10 Hz) .. 60 s
    profile: {enabled: false}      # no sampling

``JUICE_PROFILE_HZ`` overrides it for one command (``off`` disables). Not part of run keys:
sampling does not change what a run measures (its own cost is stated in benchmarks/README.md).
"""

from __future__ import annotations

from pydantic import Field, StrictBool

from juice.spec.base import Strict


class Profile(Strict):
    enabled: StrictBool = True
    interval_s: float = Field(default=1.0, ge=0.1, le=60.0, allow_inf_nan=False,
                              description="seconds between samples, 0.1 (10 Hz) .. 60")
