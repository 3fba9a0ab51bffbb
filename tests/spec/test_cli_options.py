"""Command-line options get the same checks as spec fields: NaN, infinity and out-of-range
numbers (click accepts ``nan`` and ``inf`` for a float option), bad lab names (a lab name is a
file name under the state directory) and malformed key=value options are one line on stderr
naming the option, exit 2, before anything needs root or a running lab."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import Juice, said_lines

CASES: list[tuple[list[str], str]] = [
    (["lab", "up", "--sites", "3", "--delay", "nan"],
     "--delay (delay_ms): expected a finite number, got nan"),
    (["lab", "up", "--sites", "3", "--delay", "inf"], "--delay (delay_ms): expected a finite number"),
    (["lab", "up", "--sites", "3", "--delay", "-1"], "--delay (delay_ms): must be >= 0"),
    (["lab", "up", "--sites", "3", "--delay", "1e12"], "--delay (delay_ms): must be <= 10000"),
    (["lab", "up", "--sites", "3", "--jitter", "nan"], "--jitter (jitter_ms): expected a finite number"),
    (["lab", "up", "--sites", "3", "--loss", "101"], "--loss (loss_pct): must be <= 100"),
    (["lab", "up", "--sites", "3", "--loss", "-inf"], "--loss (loss_pct): expected a finite number"),
    (["lab", "up", "--sites", "0"], "--sites (sites): must be >= 1"),
    (["lab", "up", "--sites", "251"], "--sites (sites): must be <= 250"),
    (["lab", "up", "--sites", "6", "--zones", "0"], "--zones: must be >= 1"),
    (["lab", "up", "--sites", "6", "--zones", "2", "--intra", "inf"],
     "--intra (intra_zone_delay_ms): expected a finite number"),
    (["lab", "up", "--sites", "6", "--zones", "2", "--inter", "nan"],
     "--inter (inter_zone_delay_ms): expected a finite number"),
    (["lab", "up", "--sites", "3", "--name", "../etc"], "--name: '../etc' is not a lab name"),
    (["lab", "up", "--sites", "3", "--backend", "magic"], "--backend: expected auto, netem or userspace"),
    (["lab", "check", "--tolerance-ms", "nan"], "--tolerance-ms: expected a finite number"),
    (["lab", "check", "--tolerance-pct", "inf"], "--tolerance-pct: expected a finite number"),
    (["lab", "check", "--probes", "0"], "--probes: must be between 1 and 10000"),
    (["lab", "partition", "0"], "SITE: must be >= 1"),
    (["lab", "heal", "300"], "SITE: must be <= 250"),
    (["lab", "status", "--name", "A B"], "--name: 'A B' is not a lab name"),
    (["lab", "down", "--name", "../../x"], "--name: '../../x' is not a lab name"),
    (["db", "up", "--kind", "galera", "--opt", "gcache_mb=nan"], "--opt: gcache_mb: expected an integer"),
    (["db", "up", "--kind", "galera", "--opt", "gcache_mb=\u00b2"], "--opt: gcache_mb: expected an integer"),
    (["db", "up", "--kind", "mariadb", "--opt", "site=0"], "--opt: site: expected an integer 1..250"),
    (["db", "up", "--kind", "galera", "--opt", "segments=1"], "--opt: segments cannot be set"),
    (["db", "up", "--kind", "galera", "--opt", "sst=seed", "--opt", "sst=rsync"],
     "--opt: sst is given twice"),
    (["db", "up", "--kind", "galera", "--lab", "../x"], "--lab: '../x' is not a lab name"),
    (["db", "status", "--lab", "X"], "--lab: 'X' is not a lab name"),
    (["keystone", "up", "--workers", "0"], "--workers: expected 1..64, got 0"),
    (["keystone", "up", "--workers", "nan"], "'--workers'"),
    (["keystone", "up", "--hash-rounds", "40"], "--hash-rounds: expected 4..31"),
    (["keystone", "up", "--token-expiration", "99999999999"], "--token-expiration: expected 60..31536000"),
    (["keystone", "up", "--lab", "../x"], "--lab: '../x' is not a lab name"),
    (["analyze", ".", "--param", "sites=nan"], "--param: sites=nan: not a finite number"),
    (["analyze", ".", "--param", "sites=1e999"], "--param: sites=1e999: not a finite number"),
    (["analyze", ".", "--param", "a=1", "--param", "a=2"], "--param: a is given twice"),
    (["analyze", ".", "--filter-percentile", "nan"],
     "--filter-percentile: expected a finite number, got nan"),
    (["analyze", ".", "--filter-percentile", "-inf"], "--filter-percentile: expected a finite number"),
    (["analyze", ".", "--filter-percentile", "0"], "--filter-percentile: 0.0 is not a percentile"),
    (["report", ".", "--filter-percentile", "inf"], "--filter-percentile: expected a finite number"),
]


@pytest.mark.parametrize(("args", "message"), CASES, ids=[" ".join(c[0]) for c in CASES])
def test_bad_option_is_one_line_naming_it(juice: Juice, args: list[str], message: str) -> None:
    code, out, err = juice(*args)
    assert code == 2, out + err
    lines = said_lines(err)
    assert len(lines) == 1 and "Traceback" not in out + err, err
    assert message in lines[0], lines[0]


def test_lab_spec_file_and_flags_are_checked_together(juice: Juice, tmp_path: Path) -> None:
    spec = tmp_path / "lab.yaml"
    spec.write_text("sites: 2\ndelay_ms: .nan\n")
    code, _, err = juice("lab", "up", "--spec", str(spec))
    assert code == 2 and err.strip() == f"error: {spec}: delay_ms: expected a finite number, got .nan"
    spec.write_text("sites: 2\ndelay_ms: 5\n")
    code, _, err = juice("lab", "up", "--spec", str(spec), "--loss", "1")
    assert code == 2 and "--loss: give either --spec or flags, not both" in err
    spec.write_bytes(b"\xff\xfe\x00junk")
    code, _, err = juice("lab", "up", "--spec", str(spec))
    assert code == 2 and "not a text file" in err and len(err.strip().splitlines()) == 1
