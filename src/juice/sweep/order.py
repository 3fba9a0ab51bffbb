"""Run order as a design choice: in which order the sweep runs the points of a spec.

    points = arrange(study.expand(spec), "interleaved", seed=spec.seed)

The order is a pure function of the points, the mode and the seed (``random.Random`` seeded
with a string: the same in every process and Python version), so a resumed sweep computes the
same order and skips the complete runs wherever they stand in it.

What never moves: labs and deployments. Points stay grouped by ``lab_key`` and, inside a lab,
by ``deployment_key``, in the order ``expand`` gives them, so no mode brings up a lab or a
deployment more than ``as-written`` does. Inside a deployment, points with equal
``block_key`` (when a study's points have one: the Keystone study's WAN point, which costs a
WAN change and check) stay together, so ``shuffled`` changes the WAN as often as
``as-written``.

Modes:

- ``as-written``: ``expand``'s order (the repetitions of a point back to back). A point that
  is first on a fresh deployment is always first: comparisons along the axes inside a
  deployment are confounded with run order.
- ``shuffled``: inside every deployment, its blocks in a seeded random order and the runs in
  each block (points and repetitions together) in a seeded random order.
- ``interleaved`` (the Keystone study's default): repetition ``r`` of every point of a
  deployment is one pass over them; pass 0 is shuffled as above, odd passes run it backwards,
  even passes forwards. With an even number of repetitions every point's mean position is the
  same (a drift linear in time cancels out of every comparison) and every point is run both
  early and late (the report estimates the order effect). With one repetition it is
  ``shuffled``. Extra cost: at most (repetitions - 1) x (blocks - 1) more WAN changes per
  deployment (passes turn back at the last block, so the boundary costs none).
"""

from __future__ import annotations

import random
from collections.abc import Hashable, Sequence
from itertools import groupby
from typing import Literal, TypeVar

ORDERS = ("as-written", "shuffled", "interleaved")
Order = Literal["as-written", "shuffled", "interleaved"]
DEFAULT: Order = "interleaved"
ORDER_DOC = ("as-written | shuffled | interleaved: the order of the runs inside each deployment "
             "(labs and deployments are never brought up more often); seeded by the spec's seed")

P = TypeVar("P")


def mode_of(spec: object) -> str:
    """The spec's ``runner.order``; ``as-written`` for a spec without that field."""
    return str(getattr(getattr(spec, "runner", None), "order", None) or "as-written")


def seed_of(spec: object) -> int:
    s = getattr(spec, "seed", 0)
    return int(s) if isinstance(s, int) else 0


def _block(p: object) -> Hashable:
    return getattr(p, "block_key", None)


def _rep(p: object) -> int:
    r = getattr(p, "repetition", 0)
    return int(r) if isinstance(r, int) else 0


def _rng(seed: int, *key: object) -> random.Random:
    return random.Random(f"juice-order:{seed}:{key!r}")


def _shuffled(points: Sequence[P], rng: random.Random) -> list[P]:
    """Blocks in a random order, the runs of each block in a random order."""
    blocks = [list(b) for _k, b in groupby(points, key=_block)]
    rng.shuffle(blocks)
    for b in blocks:
        rng.shuffle(b)
    return [p for b in blocks for p in b]


def _interleaved(points: Sequence[P], rng: random.Random) -> list[P]:
    reps = sorted({_rep(p) for p in points})
    first = [p for p in points if _rep(p) == reps[0]]
    base = _shuffled(first, rng)
    pos = {_ident(p): i for i, p in enumerate(base)}
    out: list[P] = list(base)
    for n, r in enumerate(reps[1:], start=1):
        this = sorted((p for p in points if _rep(p) == r), key=lambda p: pos.get(_ident(p), len(pos)))
        out += this[::-1] if n % 2 else this
    return out


def _ident(p: object) -> str:
    """A point without its repetition: what passes of ``interleaved`` revisit."""
    key = getattr(p, "point_key", None)
    return str(key) if key is not None else repr((getattr(p, "lab_key", None),
                                                   getattr(p, "deployment_key", None), _block(p),
                                                   getattr(p, "label", p)))


def arrange(points: Sequence[P], mode: str, seed: int) -> list[P]:
    """``points`` in the run order of ``mode`` (see the module doc); a permutation of them."""
    if mode not in ORDERS:
        raise ValueError(f"unknown run order {mode!r} (choose from {', '.join(ORDERS)})")
    if mode == "as-written":
        return list(points)
    out: list[P] = []
    for lab_key, by_lab in groupby(points, key=lambda p: getattr(p, "lab_key", None)):
        for dep_key, by_dep in groupby(by_lab, key=lambda p: getattr(p, "deployment_key", None)):
            dep = list(by_dep)
            rng = _rng(seed, lab_key, dep_key)
            out += _shuffled(dep, rng) if mode == "shuffled" else _interleaved(dep, rng)
    return out


def deployment_id(p: object) -> str:
    """The deployment a point runs in, as text (stored with the run's order)."""
    return repr((getattr(p, "lab_key", None), getattr(p, "deployment_key", None)))
