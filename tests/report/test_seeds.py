"""The seed beside Juice: every study's reference file loads and names its seed source; the
"Seed vs Juice" table appears in each study's section with values computed from the results
(change the data: the value or the verdict changes); rows without data say "not measured
here"; a multi-study report's summary carries each section's verdict tally."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from juice.report import seeds as S
from juice.studies import report as render
from juice.studies.messaging import report as msg_report
from juice.studies.messaging import seeds as msg_seeds
from juice.studies.nova import report as nova_report
from juice.studies.nova import seeds as nova_seeds
from juice.studies.schedulerdb import report as sdb_report
from juice.studies.schedulerdb import seeds as sdb_seeds
from tests.report.synth import messaging_results, nova_results

FIXTURES = Path(__file__).parents[1] / "fixtures" / "results-0.1"
PACKAGES = {"juice.studies.keystone": {"000"}, "juice.studies.schedulerdb": {"001"},
            "juice.studies.nova": {"002", "004"}, "juice.studies.messaging": {"003"}}
SEEDS_DIR = next((p / "shared" / "seeds" for p in Path(__file__).resolve().parents
                  if (p / "shared" / "seeds").is_dir()), None)


@pytest.mark.parametrize("package", sorted(PACKAGES))
def test_the_reference_file_loads_and_every_row_names_its_seed_source(package: str) -> None:
    refs = S.load_references(package)
    assert len(refs) >= 5
    assert {r.seed for r in refs} == PACKAGES[package]
    for r in refs:
        assert re.fullmatch(r"\d{3}_[0-9a-f]{16}\.txt", r.file) and r.file.startswith(r.seed)
        assert r.source.strip() and r.conditions.strip() and r.value.strip()
        assert f"seed {r.seed}, {r.source}" in r.seed_text()
        if SEEDS_DIR is not None:  # the seed files sit in shared/ beside the repository
            assert (SEEDS_DIR / r.file).is_file(), r.file
    if SEEDS_DIR is not None:  # a transcribed number is in the seed's text
        text = {r.file: (SEEDS_DIR / r.file).read_text() for r in refs}
        checked = [r for r in refs if re.search(r"\d+\.\d+", r.value) and not r.approx]
        for r in checked:
            for x in re.findall(r"\d+\.\d+", r.value):
                assert x in text[r.file], (r.id, x)


def test_an_incomplete_reference_row_is_named_with_what_it_lacks() -> None:
    head = "seeds: {'000': {file: 000_a3ecfaa45c7dfacd.txt}}\nrows:\n"
    row = "  - {id: x, what: w, seed: '000', conditions: c, value: '1'}\n"
    with pytest.raises(ValueError, match=r"row 1 \(x\) lacks source"):
        S.parse_references(head + row)
    with pytest.raises(ValueError, match="seed '009' has no file"):
        S.parse_references(head + row.replace("'000'", "'009'").replace("value", "source: s, value"))
    ok = S.parse_references(head + row.replace("value", "source: Fig. 1, value"))
    assert ok[0].seed_text() == "1 (seed 000, Fig. 1)"


def _rows(html: str) -> dict[str, list[str]]:
    """what -> [seed, Juice, conditions, verdict] of the seed table in ``html``."""
    block = html[html.index("<section class=seeds"):]
    block = block[:block.index("</section>")]
    out = {}
    for tr in re.findall(r"<tr>(.*?)</tr>", block, re.S)[1:]:
        cells = [re.sub(r"<[^>]+>", "", c) for c in re.findall(r"<td[^>]*>(.*?)</td>", tr, re.S)]
        out[cells[0]] = cells[1:]
    return out


def test_unmatched_rows_say_not_measured_and_never_carry_a_number() -> None:
    refs = S.load_references("juice.studies.keystone")
    t = S.rows(refs, [S.Match(refs[0].id, "96 / 4", S.SAME, "close")])
    assert t.loc[0, "Juice"] == "96 / 4" and t.loc[0, "verdict"] == "same shape: close"
    rest = t.iloc[1:]
    assert (rest["Juice"] == S.NOT_HERE).all()
    assert rest["verdict"].str.startswith(S.NOT_MEASURED).all()
    with pytest.raises(ValueError, match="unknown reference rows: nope"):
        S.rows(refs, [S.Match("nope", "1", S.SAME)])
    with pytest.raises(ValueError, match="verdict"):
        S.Match("x", "1", "roughly")


def test_juice_conditions_come_from_the_manifests() -> None:
    m = {"host": {"hostname": "a", "cpus": 2, "mem_gib": 23.5}, "juice": "0.3.0",
         "versions": {"mariadbd": "mariadbd  Ver 10.11.19-MariaDB-0+deb12u1 for debian"},
         "deployment": {"keystone_version": "30.0.0"}}
    one = S.juice_conditions([m])
    assert one.startswith("1 host (2 CPUs, 23.5 GiB, every site on it)")
    assert "keystone 30.0.0" in one and "mariadbd 10.11.19-MariaDB-0+deb12u1" in one and "juice 0.3.0" in one
    two = S.juice_conditions([m, {**m, "host": {"hostname": "b", "cpus": 8, "mem_gib": 64}}])
    assert two.startswith("2 hosts (2/8 CPUs")
    hosts = [{"site": i, "address": f"h{i}", "hostname": f"h{i}", "nproc": 4} for i in (1, 2, 3)]
    ssh = S.juice_conditions([{**m, "wan": {"provider": {"provider": "enoslib-static", "hosts": hosts}}}])
    assert ssh.startswith("3 hosts (4 CPUs)")


def test_keystone_seed_table_values_come_from_the_runs(tmp_path: Path) -> None:
    src = FIXTURES / "quickstart"
    html = render([src], tmp_path / "k.html").read_text()
    rows = _rows(html)
    auth = rows["%reads/%writes: authenticate-user-and-validate-token"]
    assert auth[0].startswith("96.46 / 3.54 (seed 000") and auth[3].startswith("same shape")
    write = rows["%reads/%writes: create-user-update-password"]
    assert write[3].startswith("different")
    assert rows["%reads/%writes: get-entities"][1] == "not measured here"
    # the fixture has one run per point: the write contrast cannot be decided from it
    delay = rows["Delay: Galera holds up on reads (authenticate), suffers on writes "
                 "(create-user-update-password)"][3]
    assert delay.startswith("no verdict") and "one run a side" in delay
    high = rows["High vs light load: Galera&#x27;s mean completion time (authenticate)"]
    assert high[1] == "not measured here"
    # the same runs with the write scenario's statement counts moved to the seed's: same shape
    copy = tmp_path / "quickstart"
    shutil.copytree(src, copy)
    for man in copy.glob("create_user_update_password-*/manifest.json"):
        m = json.loads(man.read_text())
        m["rwratio"].update(pct_reads=89.5, pct_writes=10.5)
        man.write_text(json.dumps(m))
    again = _rows(render([copy], tmp_path / "k2.html").read_text())
    write2 = again["%reads/%writes: create-user-update-password"]
    assert write2[1].startswith("89.50 / 10.50") and write2[3].startswith("same shape")


def test_nova_seed_rows_follow_the_data(tmp_path: Path) -> None:
    fail = nova_seeds.matches(nova_report.load([nova_results(tmp_path / "a", sched_effect=-1.0)]))
    runs = nova_report.load([nova_results(tmp_path / "b", sched_effect=2.0, concurrency=(5, 10, 20))])
    clean = nova_seeds.matches(runs.assign(failed=0, faults="{}"))  # the same runs with no failure
    pick = lambda ms, i: next(m for m in ms if m.id == i)  # noqa: E731
    assert pick(fail, "s002.stable_concurrency").verdict == S.SAME
    assert "failures from 60" in str(pick(fail, "s002.stable_concurrency").juice)
    assert pick(clean, "s002.stable_concurrency").verdict == S.UNDECIDED
    assert pick(fail, "s004.schedulers").verdict == S.SAME       # 4 schedulers faster, as the seed's
    assert pick(clean, "s004.schedulers").verdict == S.DIFFERENT  # 4 schedulers slower
    assert pick(fail, "s004.success").verdict == S.SAME and pick(clean, "s004.success").verdict == S.DIFFERENT
    assert "VMs running" in str(pick(fail, "s002.boot_vs_running").juice)
    assert pick(fail, "s004.err_neutron").juice is None  # fake neutron: not measured here


def test_scheduler_db_seed_rows_follow_the_fits() -> None:
    rng = np.random.default_rng(3)
    rows = []
    for upd, c in ((False, 0.0), (True, 2e-7)):
        for n in range(1000, 8001, 1000):
            for rep in range(2):
                for t in 1e-4 * n + c * n * n + rng.normal(0, 0.002, 5):
                    rows.append({"ok": True, "nodes": n, "seconds": t, "backend": "mariadb",
                                 "client": "pymysql", "track": "historical-2013.1", "schedulers": 1,
                                 "updates": upd, "run": f"r{upd}{rep}", "repetition": rep})
    reads = pd.DataFrame(rows)
    confs = sdb_report.fits(reads, 60.0)
    ms = {m.id: m for m in sdb_seeds.matches(reads, confs, 60.0, sdb_report._label)}
    assert ms["sdb.static_linear"].verdict == S.SAME
    assert ms["sdb.updates_crossing"].verdict == S.SAME and "K nodes" in str(ms["sdb.updates_crossing"].juice)
    assert "sdb.memcached" not in ms
    fixture = sdb_report.load([FIXTURES / "sdb-fixture"])
    got = {m.id: m for m in sdb_seeds.matches(fixture[0], sdb_report.fits(fixture[0], 60.0), 60.0,
                                              sdb_report._label)}
    assert got["sdb.memcached"].verdict == S.UNDECIDED and "600 nodes" in str(got["sdb.memcached"].juice)
    assert "sdb.updates_crossing" not in got  # the fixture has no updates: not measured here


def test_messaging_locality_verdict_follows_the_share_kept_local(tmp_path: Path) -> None:
    def verdict(root: Path, share: float) -> str:
        df = msg_report.load([messaging_results(root, local={"rabbitmq×3": share}, agents=(10,), reps=1)])
        return next(m.verdict for m in msg_seeds.matches(df) if m.id == "msg.broker_locality")

    assert verdict(tmp_path / "a", 1 / 3) == S.SAME
    assert verdict(tmp_path / "b", 0.95) == S.DIFFERENT


def test_every_section_has_its_seed_table_and_the_summary_counts_verdicts(tmp_path: Path) -> None:
    paths = [FIXTURES / "quickstart", FIXTURES / "sdb-fixture", nova_results(tmp_path / "nova"),
             messaging_results(tmp_path / "msg", agents=(10,), reps=1)]
    text = render(paths, tmp_path / "all.html").read_text()
    titles = re.findall(r'<section class=seeds data-title="([^"]+)"', text)
    assert sorted(titles) == sorted(["Keystone", "scheduler-db", "nova", "messaging"])
    summary = text[:text.index("</section>")]
    assert summary.count("Seed beside Juice:") == 4 and "same shape" in summary
    for t in titles:  # the seed table follows the section's findings
        assert text.index(f'<section class=findings data-title="{t}"') < text.index(
            f'<section class=seeds data-title="{t}"')


def test_each_seed_states_its_setting_and_the_table_shows_it() -> None:
    for package in PACKAGES:
        refs = S.load_references(package)
        assert all(len(r.setting) > 40 for r in refs), package
    refs = S.load_references("juice.studies.nova")
    html = S.seed_table("nova", refs, [], "1 host (2 CPUs, 23.5 GiB, every site on it)")
    assert "Seed 002 (002_d74f4a576a9bdaca.txt): SoftLayer" in html and "Seed 004 (" in html
    assert "<li>Juice: 1 host (2 CPUs" in html


def test_the_docs_list_every_reference_value() -> None:
    doc = (Path(__file__).parents[2] / "docs" / "seeds.md").read_text()
    for package in PACKAGES:
        for r in S.load_references(package):
            assert f"`{r.id}`" in doc and r.value.replace("|", "\\|") in doc, r.id


def test_keystone_high_load_rows_follow_the_data() -> None:
    from juice.studies.keystone import seeds as ks_seeds

    rng = np.random.default_rng(5)

    def runs(mariadb_fail: float, galera_slow: float) -> pd.DataFrame:
        rows = []
        for rd in ("mariadb", "galera"):
            for load in ("light", "high"):
                slow = galera_slow if (rd, load) == ("galera", "high") else 1.0
                for rep in range(2):
                    for i, v in enumerate(rng.normal(0.1 * slow, 0.005, 40)):
                        fail = rd == "mariadb" and load == "high" and i < 40 * mariadb_fail
                        rows.append({"run": f"{rd}-{load}-{rep}", "rdbms": rd, "load": load, "sites": 9,
                                     "delay_ms": 0.0, "failed": fail, "total_s": v,
                                     "scenario": "KeystoneBasic.authenticate_user_and_validate_token"})
        return pd.DataFrame(rows)

    def got(it: pd.DataFrame) -> dict[str, S.Match]:
        return {m.id: m for m in ks_seeds.matches(it, None)}

    collapse, calm = got(runs(0.9, 4.0)), got(runs(0.0, 1.0))
    assert collapse["high.mariadb_failures"].verdict == S.SAME
    assert calm["high.mariadb_failures"].verdict == S.DIFFERENT
    ratio = re.search(r"\(([\d.]+)×\)", str(collapse["high.galera_time"].juice))
    assert collapse["high.galera_time"].verdict == S.SAME and ratio and 3.5 < float(ratio.group(1)) < 4.5
    assert calm["high.galera_time"].verdict == S.DIFFERENT
    assert "rw.authenticate_user_and_validate_token" not in collapse  # no counters: not measured here


def test_axes_stored_as_categories_give_the_same_keystone_rows() -> None:
    """Runs read back from parquet carry their axes as categories (unordered, closed to new
    values): the seed rows are the same as from plain columns (seen in real runs: min() and
    fillna() on a category failed and took the report with them)."""
    from juice.studies.keystone import seeds as ks_seeds

    rng = np.random.default_rng(9)
    rows = [{"run": f"{rd}-{d}-{load}", "rdbms": rd, "load": load, "sites": 3, "delay_ms": float(d),
             "failed": False, "total_s": v, "scenario": "KeystoneBasic.authenticate_user_and_validate_token"}
            for rd in ("mariadb", "galera") for d in (0, 50) for load in ("light", None)
            for v in rng.normal(0.1 + 0.001 * d, 0.005, 30)]
    flat = pd.DataFrame(rows)
    cats = flat.astype({c: "category" for c in ("rdbms", "load", "delay_ms", "scenario")})
    want = [(m.id, m.verdict, m.juice) for m in ks_seeds.matches(flat, None)]
    assert want and [(m.id, m.verdict, m.juice) for m in ks_seeds.matches(S.plain(cats), None)] == want
    html = ks_seeds.section(cats, None, [])
    assert "not computed" not in html and all(f">{mid}<" not in html for mid, _, _ in want)


def test_a_seed_block_that_cannot_be_made_says_why_and_the_report_goes_on() -> None:
    def broken() -> str:
        raise TypeError("Categorical is not ordered for operation min")

    note = S.guarded("Keystone", broken)
    assert "not computed here" in note and "Categorical is not ordered" in note
    assert S.guarded("Keystone", lambda: "<table></table>") == "<table></table>"
