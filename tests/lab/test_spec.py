from __future__ import annotations

from pathlib import Path

import pytest

from juice.errors import UserError
from juice.lab import spec


def test_uniform_delay_applies_to_every_ordered_pair() -> None:
    s = spec.parse({"sites": 3, "delay_ms": 50})
    links = spec.links(s)
    assert len(links) == 6
    assert {link.delay_ms for link in links.values()} == {50}
    assert spec.expected_rtt_ms(links, 1, 3) == 100


def test_hierarchical_zones_follow_the_seed_model() -> None:
    s = spec.parse({"sites": 9, "zones": spec.even_zones(9, 3),
                    "intra_zone_delay_ms": 10, "inter_zone_delay_ms": 75})
    links = spec.links(s)
    assert links[(1, 2)].delay_ms == 10
    assert links[(3, 4)].delay_ms == 75
    assert links[(9, 7)].delay_ms == 10
    assert spec.expected_rtt_ms(links, 1, 9) == 150


def test_matrix_is_row_source_column_destination() -> None:
    s = spec.parse({"sites": 2, "matrix": [[0, 5], [20, 0]]})
    links = spec.links(s)
    assert links[(1, 2)].delay_ms == 5
    assert links[(2, 1)].delay_ms == 20


def test_pair_override_is_symmetric_unless_directed() -> None:
    s = spec.parse({"sites": 3, "delay_ms": 50, "pairs": [
        {"a": 1, "b": 2, "delay_ms": 0}, {"a": 1, "b": 3, "delay_ms": 5, "directed": True}]})
    links = spec.links(s)
    assert links[(2, 1)].delay_ms == 0 and not links[(2, 1)].emulated
    assert links[(1, 3)].delay_ms == 5 and links[(3, 1)].delay_ms == 50


def test_jitter_and_loss_are_carried_per_link() -> None:
    s = spec.parse({"sites": 2, "delay_ms": 1, "jitter_ms": 0.5, "loss_pct": 2})
    link = spec.links(s)[(1, 2)]
    assert (link.jitter_ms, link.loss_pct) == (0.5, 2)


@pytest.mark.parametrize(("data", "field"), [
    ({"sites": 3, "delay_ms": 5, "colour": "red"}, "colour"),
    ({"sites": 3, "delay_ms": -5}, "delay_ms"),
    ({"sites": 3, "delay_ms": 5, "pairs": [{"a": 1, "b": 7, "delay_ms": 1}]}, "pairs.0.b"),
    ({"sites": 3, "zones": {"Z1": [1, 2], "Z2": [3, 4]}, "intra_zone_delay_ms": 1,
      "inter_zone_delay_ms": 2}, "zones.Z2"),
    ({"sites": 3, "zones": {"Z1": [1, 2]}, "intra_zone_delay_ms": 1,
      "inter_zone_delay_ms": 2}, "zones"),
    ({"sites": 2, "matrix": [[0, 1]]}, "matrix"),
    ({"sites": 2, "matrix": [[0, 1], [-1, 0]]}, "matrix.1.0"),
    ({"sites": 2, "delay_ms": 1, "matrix": [[0, 1], [1, 0]]}, "delay_ms and matrix"),
    ({"sites": 0}, "sites"),
    ({"sites": 2, "name": "Bad Name"}, "name"),
    ({"sites": 2, "backend": "magic"}, "backend"),
])
def test_bad_specs_name_the_field(data: dict[str, object], field: str) -> None:
    with pytest.raises(UserError) as e:
        spec.parse(data, "lab.yaml")
    assert e.value.exit_code == 2
    msg = str(e.value)
    assert msg.startswith("lab.yaml: ")
    assert field in msg
    assert "\n" not in msg


def test_load_reads_yaml_and_reports_missing_file(tmp_path: Path) -> None:
    f = tmp_path / "lab.yaml"
    f.write_text("sites: 2\ndelay_ms: 3\n")
    assert spec.load(f).delay_ms == 3
    with pytest.raises(UserError, match="no such spec file"):
        spec.load(tmp_path / "nope.yaml")
    f.write_text("sites: [\n")
    with pytest.raises(UserError, match="not valid YAML"):
        spec.load(f)


def test_even_zones_splits_contiguously() -> None:
    assert spec.even_zones(5, 2) == {"Z1": [1, 2, 3], "Z2": [4, 5]}
    with pytest.raises(UserError, match="--zones"):
        spec.even_zones(2, 3)
