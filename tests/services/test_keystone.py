"""Keystone: rendering (pure) and the real Keystone 30 under gunicorn in a 3-site lab, on
Galera (cache on) and on central MariaDB through the CLI (cache off)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from juice.cli.keystone import keystone_app
from juice.cli.keystone import load_record as load_ks_record
from juice.errors import ServiceError, UserError
from juice.lab import LocalLab, netns, spec
from juice.lab.place import ThisHost
from juice.openstack.creds import AdminCredentials, read_openrc, render_openrc
from juice.openstack.http import issue_token, validate_token
from juice.services import kinds
from juice.services.base import Endpoint, Endpoints, ServerRecord, Service, wait_for
from juice.services.caches.memcached import Memcached
from juice.services.databases import counters
from juice.services.openstack import keystone as ksmod
from juice.services.openstack.keystone import Keystone, KeystoneOptions, children_of, render_conf
from juice.util import proc
from tests.services.conftest import needs_lab

FAST = KeystoneOptions(password_hash_rounds=4)


# ---- pure -----------------------------------------------------------------------------------

def _conf(opts: KeystoneOptions, memcache: str | None, slave: str | None = None) -> str:
    return render_conf(db_url="mysql+pymysql://u:p@10.210.1.2:3306/keystone", slave_url=slave,
                       memcache=memcache, fernet_dir=Path("/k/f"), credential_dir=Path("/k/c"), opts=opts)


def test_conf_cache_on_points_at_the_site_memcached() -> None:
    text = _conf(KeystoneOptions(password_hash_rounds=5, token_expiration_s=600), "10.210.2.2:11211")
    assert "enabled = true" in text and "memcache_servers = 10.210.2.2:11211" in text
    assert "backend = dogpile.cache.pymemcache" in text
    assert "password_hash_rounds = 5" in text and "expiration = 600" in text
    assert "key_repository = /k/f" in text and "key_repository = /k/c" in text
    assert "slave_connection" not in text


def test_conf_cache_off_and_read_endpoint() -> None:
    text = _conf(KeystoneOptions(cache=False), None, slave="postgresql+psycopg2://u@10.210.3.2:5432/keystone")
    assert "enabled = false" in text and "memcache_servers" not in text
    assert "slave_connection = postgresql+psycopg2://u@10.210.3.2:5432/keystone" in text


@pytest.mark.parametrize("field,value", [("workers", 0), ("password_hash_rounds", 3),
                                         ("token_expiration_s", 1), ("sites", ())])
def test_options_reject_bad_values_naming_the_field(field: str, value: object) -> None:
    with pytest.raises(UserError, match=f"^{field}:"):
        KeystoneOptions(**{field: value})  # type: ignore[arg-type]


def test_password_is_not_in_repr_and_openrc_round_trips(tmp_path: Path) -> None:
    creds = AdminCredentials(urls=((1, "http://10.210.1.2:5000/v3"), (2, "http://10.210.2.2:5000/v3")),
                             username="admin", password="s3cr3t-Pw")
    assert "s3cr3t" not in repr(creds)
    assert creds.auth_url(2) == "http://10.210.2.2:5000/v3" and creds.auth_url(9).startswith("http://10.210.1.")
    rc = tmp_path / "openrc"
    rc.write_text(render_openrc(creds, 1, "Region1"))
    assert read_openrc(rc) == creds
    with pytest.raises(UserError, match="openrc"):
        read_openrc(tmp_path / "missing")


class FakeSites:
    """A lab for constructor checks only (nothing runs)."""

    sites = range(1, 4)
    workdir = Path("/nonexistent")

    def site_ip(self, site: int) -> str:
        return f"10.210.{site}.2"

    def place(self, site: int) -> ThisHost:
        return ThisHost(self.workdir)  # for the checks on this machine's files


class FakeDb(Service):
    """Stands for the database, which these checks never reach."""

    kind = "fake"

    def configure(self) -> None: ...
    def start(self) -> None: ...
    def wait_healthy(self, timeout: float = 60.0) -> None: ...
    def stop(self) -> None: ...

    def endpoint(self, site: int) -> Endpoints:
        ep = Endpoint("mysql", "10.210.1.2", 3306, "juice")
        return Endpoints(ep, ep)

    def records(self) -> list[ServerRecord]:
        return []

    def log_files(self) -> list[Path]:
        return []


def test_missing_openstack_venv_says_run_setup(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(ksmod, "VENV", tmp_path / "nope")
    lab = FakeSites()
    ks = Keystone(lab, FakeDb(lab), options=FAST)  # type: ignore[arg-type]
    with pytest.raises(ServiceError, match="scripts/setup.sh"):
        ks.configure()
    with pytest.raises(UserError, match="sites: 7"):
        Keystone(lab, FakeDb(lab), options=KeystoneOptions(sites=(7,)))  # type: ignore[arg-type]


# ---- real servers ---------------------------------------------------------------------------

def _all_pids(ks: Keystone) -> list[int]:
    pids = [r.pid for r in ks.records()]
    return pids + [w for r in ks.records() if r.kind == "keystone" for w in children_of(r.pid)]


def _lab(name: str) -> LocalLab:
    return LocalLab.up(spec.parse({"name": name, "sites": 3, "delay_ms": 5}), ephemeral=True)


@needs_lab[0]
@needs_lab[1]
@needs_lab[2]
def test_keystone_on_galera_cache_on(lab_name: str, tmp_path: Path) -> None:
    with _lab(lab_name) as lab, kinds.deploy(lab, "galera") as db:
        ks = Keystone(lab, db, options=FAST)
        try:
            ks.up()
            # pre-warmed: each site's worker went through its first full garbage collection
            warm = ks.facts()["prewarm"]
            assert sorted(warm) == ["1", "2", "3"], warm
            for s, w in warm.items():
                assert w["done"] and w["errors"] == 0 and w["requests"] > 0, w
                (worker,) = children_of(ks.servers[int(s)].pid)
                assert list(w["first_full_gc_ms"]) == [str(worker)] and w["first_full_gc_ms"][str(worker)] > 0
            gcs = ks.gc_counters()
            assert gcs["keystone.full_gcs"] >= 3 and gcs["keystone.full_gc_ms"] > 0
            creds = ks.admin_credentials()
            token = issue_token(lab, 1, creds)
            before = ks.memcached.stats(3) if ks.memcached else {}
            for _ in range(3):
                r = validate_token(lab, 3, ks.auth_url(3), token)  # issued at site 1, checked at site 3
                assert r.status == 200, r.body[:300]
            after = ks.memcached.stats(3) if ks.memcached else {}
            assert int(after["get_hits"]) > int(before["get_hits"])
            assert int(after["curr_items"]) > 0

            catalog = r.json()["token"]["catalog"]
            identity = [e for svc in catalog if svc["type"] == "identity" for e in svc["endpoints"]]
            assert {(e["region"], e["interface"], e["url"]) for e in identity} == {
                (f"Region{k}", iface, f"http://{lab.site_ip(k)}:5000/v3")
                for k in (1, 2, 3) for iface in ("public", "internal", "admin")}
            assert ks.region(2) == "Region2" and ks.auth_url(2) == f"http://{lab.site_ip(2)}:5000/v3"

            facts = ks.facts()
            assert facts["db_kind"] == "galera" and facts["cache"] is True and facts["keystone_version"] != ""
            assert creds.password not in json.dumps(facts)
            copies = ks.collect_logs(tmp_path / "logs")
            assert len(copies) >= 6
            assert all(creds.password not in c.read_text(errors="replace") for c in copies)
            assert (ks.openrc.stat().st_mode & 0o777) == 0o600

            # A second deployment finds the port taken and says so before touching anything.
            with pytest.raises(ServiceError, match="already taken"):
                Keystone(lab, db, options=FAST).configure()
            pids = _all_pids(ks)
            assert len(pids) == 3 + 3 + 3  # gunicorn masters, their workers, memcacheds

            # Crashes for fault schedules: kill -9 one server, the others carry on, restart it.
            killed = db.kill(3)
            assert not proc.alive(killed["pid"])
            wait_for(lambda: db.cluster_size(db.nodes[1]) == 2, 60, "galera sees node 3 leave")
            assert issue_token(lab, 1, creds)  # site 1 still serves
            back = db.restart(3)
            assert back["cluster_size"] == 3 and [db.cluster_size(n) for n in db.nodes.values()] == [3, 3, 3]
            gone = ks.kill(2)
            assert not proc.alive(gone["pid"]) and not any(proc.alive(w) for w in gone["workers"])
            with pytest.raises(Exception):  # noqa: B017 (refused or reset: nothing listens)
                issue_token(lab, 2, creds)
            with pytest.raises(ServiceError, match="nothing killed"):
                ks.restart(1)
            assert ks.restart(2)["pid"] and issue_token(lab, 2, creds)
            pids += _all_pids(ks)
        finally:
            ks.stop()
        assert not any(proc.alive(p) for p in pids)


@needs_lab[0]
@needs_lab[1]
@needs_lab[2]
def test_cli_keystone_on_central_mariadb_cache_off(lab_name: str) -> None:
    runner = CliRunner()
    with _lab(lab_name) as lab, kinds.deploy(lab, "mariadb") as db:
        res = runner.invoke(keystone_app, ["up", "--lab", lab_name, "--no-cache", "--hash-rounds", "4"])
        assert res.exit_code == 0, res.output + repr(res.exception)
        rec = load_ks_record(lab.workdir)
        assert rec is not None and rec["facts"]["cache"] is False and rec["facts"]["db_kind"] == "mariadb"
        pids = [s["pid"] for s in rec["servers"]]
        assert len(pids) == 3 and {s["kind"] for s in rec["servers"]} == {"keystone"}
        workers = [w for p in pids for w in children_of(p)]
        assert rec["facts"]["prewarm"] is False  # the CLI pre-warms only when asked (--prewarm)
        # Lab teardown and the crash sweep kill what runs in the site namespaces: all of it.
        in_ns = {p for k in lab.sites for p in netns.pids(lab.site_ns(k))}
        assert set(pids + workers) <= in_ns

        again = runner.invoke(keystone_app, ["up", "--lab", lab_name])
        assert again.exit_code != 0 and "already runs Keystone" in str(again.exception)
        st = runner.invoke(keystone_app, ["status", "--lab", lab_name])
        assert st.exit_code == 0 and "Region3" in st.output

        creds = read_openrc(Path(rec["openrc"]))
        mc = Memcached(lab, sites=[3])  # where a cache would be: Keystone must not use it
        try:
            mc.up(timeout=30)
            token = issue_token(lab, 1, creds)
            probe = counters.probe_for(db)
            assert validate_token(lab, 3, creds.auth_url(3), token).status == 200
            with probe.window() as w:  # a repeated validation still reads the database
                assert validate_token(lab, 3, creds.auth_url(3), token).status == 200
            assert w.result.reads > 0
            assert int(mc.stats(3)["curr_items"]) == 0 and int(mc.stats(3)["cmd_get"]) == 0
        finally:
            mc.stop()

        res = runner.invoke(keystone_app, ["down", "--lab", lab_name])
        assert res.exit_code == 0, res.output
        assert load_ks_record(lab.workdir) is None
        assert not any(proc.alive(p) for p in pids + workers)


@needs_lab[0]
@needs_lab[1]
@needs_lab[2]
def test_cli_up_without_database_names_the_fix(lab_name: str) -> None:
    with _lab(lab_name):
        res = CliRunner().invoke(keystone_app, ["up", "--lab", lab_name])
        assert res.exit_code != 0 and isinstance(res.exception, UserError)
        assert "juice db up" in str(res.exception)
