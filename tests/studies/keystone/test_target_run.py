"""The Keystone study against a cloud Juice did not set up for the run: a real Keystone 30 that
`juice lab up` / `juice db up` / `juice keystone up --publish` started beforehand, reached only
through the clouds.yaml it wrote (loopback forwarders), as a user's cloud would be.

Checked: the quickstart scenarios run, report and export Rally JSON with no password anywhere
in the results; the dry run lists exactly the calls the server's access log then shows; a cloud
that is not a Juice lab needs --yes; Ctrl-C leaves no Juice-made user, and after a kill -9
`juice cleanup --target` removes what was left.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from juice.lab import state
from juice.openstack.keystone import Credentials, KeystoneClient
from tests.services.conftest import needs_lab

pytestmark = needs_lab

JUICE = str(Path(sys.executable).parent / "juice")
ID = re.compile(r"[0-9a-f]{32}")


def juice(*args: str, timeout: float = 600, check: bool = True) -> subprocess.CompletedProcess[str]:
    cp = subprocess.run([JUICE, *args], capture_output=True, text=True, timeout=timeout,
                        stdin=subprocess.DEVNULL, check=False)
    if check and cp.returncode != 0:
        raise AssertionError(f"juice {' '.join(args)} -> {cp.returncode}\n{cp.stdout}\n{cp.stderr}")
    return cp


@pytest.fixture(scope="module")
def cloud(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """A published Keystone (2 sites, MariaDB, access log); its clouds.yaml, log and admin."""
    name = "t" + os.urandom(3).hex()
    try:
        juice("lab", "up", "--name", name, "--sites", "2")
        juice("db", "up", "--kind", "mariadb", "--lab", name)
        juice("keystone", "up", "--lab", name, "--publish", "--access-log", "--hash-rounds", "4")
        st = state.load(name)
        assert st is not None
        workdir = Path(st.workdir)
        clouds = workdir / "clouds.yaml"
        entry = yaml.safe_load(clouds.read_text())["clouds"][f"juice-{name}"]
        yield {"name": name, "clouds": clouds, "cloud": f"juice-{name}", "entry": entry,
               "log": workdir / "s1" / "keystone" / "keystone-s1.log",
               "tmp": tmp_path_factory.mktemp("target")}
    finally:
        juice("lab", "down", "--name", name, check=False)


def write_spec(path: Path, cloud: dict[str, Any], scenarios: list[Any], runner: dict[str, Any],
               clouds: Path | None = None, max_rps: float = 200) -> Path:
    path.write_text(yaml.safe_dump({
        "name": path.stem, "results": str(path.parent / "results" / path.stem),
        "target": {"cloud": cloud["cloud"], "clouds_file": str(clouds or cloud["clouds"]),
                   "max_rps": max_rps},
        "scenarios": scenarios, "runner": runner}))
    return path


def juice_users(cloud: dict[str, Any]) -> list[str]:
    """Names of the users Juice made (s_juice_...), asked of the cloud itself."""
    auth = cloud["entry"]["auth"]

    async def go() -> list[str]:
        c = KeystoneClient(auth["auth_url"])
        try:
            tok = await c.issue_token(Credentials(auth["username"], auth["password"], auth["project_name"]))
            return [u["name"] for u in await c.list_users(tok.id) if u["name"].startswith("s_juice_")]
        finally:
            await c.close()

    return asyncio.run(go())


def access_calls(log: Path, start: int) -> Counter[str]:
    """``METHOD /path[?query]`` per request after line ``start`` of the access log, ids as {id}."""
    out: Counter[str] = Counter()
    for line in log.read_text().splitlines()[start:]:
        if line.startswith("juice-access "):
            _, method, path, q, _status = line.split(" ")
            query = q.removeprefix("q=")
            out[f"{method} {ID.sub('{id}', path + ('?' + query if query else ''))}"] += 1
    return out


def dry_calls(stdout: str) -> Counter[str]:
    out: Counter[str] = Counter()
    for line in stdout.splitlines():
        m = re.match(r"^\s+(\d+)\s{2}(\S+ \S+)$", line)
        if m:
            out[m.group(2)] += int(m.group(1))
    return out


def test_quickstart_scenarios_through_clouds_yaml_and_the_dry_run_matches_the_access_log(
        cloud: dict[str, Any]) -> None:
    spec = write_spec(cloud["tmp"] / "ks.yaml", cloud,
                      ["authenticate_user_and_validate_token", "create_user_update_password"],
                      {"times": 4, "concurrency": 2})
    dry = juice("run", str(spec), "--dry-run")
    planned = dry_calls(dry.stdout)
    assert planned["POST /v3/users"] == 4 + 1 + 1  # 4 iterations + 2 context users (one per run)
    start = len(cloud["log"].read_text().splitlines())
    done = juice("run", str(spec))
    assert "2 runs completed now" in done.stdout and "report:" in done.stdout
    time.sleep(0.5)  # gunicorn writes the access line after the response
    assert access_calls(cloud["log"], start) == planned

    results = cloud["tmp"] / "results" / "ks"
    runs = sorted(d for d in results.iterdir() if d.is_dir())
    assert len(runs) == 2
    for r in runs:
        m = json.loads((r / "manifest.json").read_text())
        assert m["params"]["target"] == f"cloud {cloud['cloud']}"
        assert m["target"]["juice_lab"] == cloud["name"]
        assert m["target"]["rtt"]["Region1"]["http"]["n"] == 5 and "wan" in m["target"]["not_measured"]
        assert m["leftovers_deleted"] == {"users": 0, "projects": 0, "services": 0, "roles": 0}
        rally = json.loads((r / "rally.json").read_text())
        assert len(rally["tasks"][0]["subtasks"][0]["workloads"][0]["data"]) == 4
    assert "Existing cloud" in (results / "report.html").read_text()
    password = cloud["entry"]["auth"]["password"]
    leaks = [p for p in results.rglob("*") if p.is_file() and password.encode() in p.read_bytes()]
    assert leaks == []
    assert juice_users(cloud) == []


def test_a_cloud_that_is_not_a_juice_lab_needs_yes(cloud: dict[str, Any]) -> None:
    doc = yaml.safe_load(cloud["clouds"].read_text())
    for entry in doc["clouds"].values():
        entry.pop("juice_lab")
    other = cloud["tmp"] / "clouds.yaml"
    other.write_text(yaml.safe_dump(doc))
    other.chmod(0o600)
    spec = write_spec(cloud["tmp"] / "other.yaml", cloud, ["create_user_update_password"],
                      {"times": 2, "concurrency": 1}, clouds=other)
    refused = juice("run", str(spec), check=False)
    assert refused.returncode == 2 and "--yes" in refused.stderr and "1 project, 3 users" in refused.stderr
    assert juice_users(cloud) == [] and not (cloud["tmp"] / "results" / "other").exists()
    juice("run", str(spec), "--yes")
    assert juice_users(cloud) == []


def _start_and_wait_for_users(spec: Path, cloud: dict[str, Any]) -> subprocess.Popen[str]:
    p = subprocess.Popen([JUICE, "run", str(spec), "--no-report"], stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True, stdin=subprocess.DEVNULL,
                         start_new_session=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and len(juice_users(cloud)) < 3:
        assert p.poll() is None, p.communicate()[0]
        time.sleep(0.5)
    assert len(juice_users(cloud)) >= 3
    return p


def test_ctrl_c_leaves_no_user_and_cleanup_removes_what_a_kill_left(cloud: dict[str, Any]) -> None:
    spec = write_spec(cloud["tmp"] / "long.yaml", cloud, ["create_user_update_password"],
                      {"times": 2000, "concurrency": 2}, max_rps=40)
    p = _start_and_wait_for_users(spec, cloud)
    os.killpg(p.pid, signal.SIGINT)  # what Ctrl-C in a terminal sends
    out, _ = p.communicate(timeout=120)
    assert p.returncode != 0 and "cleanup s_juice_" in out
    assert juice_users(cloud) == []

    p = _start_and_wait_for_users(spec, cloud)
    os.killpg(p.pid, signal.SIGKILL)  # no chance to clean up: the drivers die with it
    p.communicate(timeout=60)
    left = juice_users(cloud)
    assert left
    cleaned = juice("cleanup", "--target", str(spec))
    assert f"deleted {len(left)} users" in cleaned.stdout
    assert juice_users(cloud) == []


def test_a_read_only_database_url_gives_statement_counters(cloud: dict[str, Any],
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """The user hands Juice a database URL (here: the lab's MariaDB published on loopback, as
    Keystone's own account): %reads/%writes around each run, the URL never in the results."""
    from juice.lab import LocalLab
    from juice.services.openstack.keystone_publish import start_forwarder

    lab = LocalLab.get(cloud["name"])
    conf = (lab.workdir / "s1" / "keystone" / "keystone.conf").read_text()
    m = re.search(r"^connection = mysql\+pymysql://([^:]+):([^@]+)@", conf, re.M)
    assert m is not None
    srv, port = start_forwarder(lab, 1, 3306, cloud["tmp"])
    try:
        url = f"mysql://{m.group(1)}:{m.group(2)}@127.0.0.1:{port}"
        monkeypatch.setenv("JUICE_TEST_DB_URL", url)
        spec = cloud["tmp"] / "db.yaml"
        data = yaml.safe_load(write_spec(spec, cloud, ["create_user_update_password"],
                                         {"times": 3, "concurrency": 1}).read_text())
        data["target"]["db_url_env"] = "JUICE_TEST_DB_URL"
        spec.write_text(yaml.safe_dump(data))
        juice("run", str(spec), "--no-report")
        (run,) = [d for d in (cloud["tmp"] / "results" / "db").iterdir() if d.is_dir()]
        man = json.loads((run / "manifest.json").read_text())
        assert man["rwratio"]["reads"] > 0 and man["rwratio"]["writes"] >= 3  # >= one INSERT per user
        assert "db_counters" not in man["target"]["not_measured"] and man["target"]["db_counters"]
        secret = f"{m.group(1)}:{m.group(2)}@".encode()  # (the lab's password is the word "juice")
        assert not [p for p in run.rglob("*") if p.is_file() and secret in p.read_bytes()]
    finally:
        srv.stop(grace_s=2)


SSHD = Path("/usr/sbin/sshd")
SSHD_PORT = 2022  # inside site 1's namespace, below its ephemeral ports (20000-60999)
BOOT = "python3 -c import sys;exec(sys.stdin.buffer.read("


def _cmdlines() -> dict[int, str]:
    out = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                out[int(d.name)] = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                pass
    return out


@pytest.mark.skipif(not SSHD.exists(), reason="no /usr/sbin/sshd (scripts/setup.sh installs openssh-server)")
def test_ssh_access_gives_resource_profiles_of_the_clouds_servers(cloud: dict[str, Any]) -> None:
    """The user gives SSH access to the cloud's host (here: a throwaway sshd inside site 1,
    reached through a loopback forwarder, root by a throwaway key): each run gets a
    profile.parquet of its Keystone and MariaDB processes, sampled there through /proc."""
    from juice.lab import LocalLab
    from juice.services.openstack.keystone_publish import start_forwarder
    from juice.services.process import port_open, spawn

    lab = LocalLab.get(cloud["name"])
    tmp = cloud["tmp"] / "sshd"
    tmp.mkdir()
    for key in ("host", "client"):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"juice-test-{key}",
                        "-f", str(tmp / key)], check=True, timeout=30)
    (tmp / "authorized_keys").write_text((tmp / "client.pub").read_text())
    conf = tmp / "sshd_config"
    conf.write_text(f"Port {SSHD_PORT}\nListenAddress {lab.site_ip(1)}\nHostKey {tmp / 'host'}\n"
                    f"AuthorizedKeysFile {tmp / 'authorized_keys'}\nPidFile none\nUsePAM no\n"
                    "StrictModes no\nPermitRootLogin prohibit-password\nPasswordAuthentication no\n"
                    "KbdInteractiveAuthentication no\n")
    Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # sshd's privilege separation dir
    sshd = spawn(lab.place(1), [str(SSHD), "-D", "-e", "-f", str(conf)], log=tmp / "sshd.log", what="sshd")
    fwd = None
    try:
        # The forwarder accepts on loopback whether sshd listens yet or not: wait for sshd
        # itself (bounded), or a slow start makes ssh see "connection closed" at once.
        sshd.wait_ready(lambda: port_open(lab.place(1), lab.site_ip(1), SSHD_PORT), timeout=30)
        fwd, port = start_forwarder(lab, 1, SSHD_PORT, tmp)
        spec = cloud["tmp"] / "ssh.yaml"
        data = yaml.safe_load(write_spec(spec, cloud, ["authenticate_user_and_validate_token"],
                                         {"times": 6, "concurrency": 1}, max_rps=5).read_text())
        data["target"]["ssh"] = [{"host": "127.0.0.1", "port": port, "user": "root",
                                  "key_file": str(tmp / "client"), "site_name": "controller"}]
        data["profile"] = {"interval_s": 0.5}
        spec.write_text(yaml.safe_dump(data))
        done = juice("run", str(spec))
        out = done.stdout + done.stderr
        assert "resource profile over SSH: 1/1 host(s) sampling at 2 Hz" in out, out
        assert "Resource profiles" in (cloud["tmp"] / "results" / "ssh" / "report.html").read_text(), out

        (run,) = [d for d in (cloud["tmp"] / "results" / "ssh").iterdir() if d.is_dir()]
        man = json.loads((run / "manifest.json").read_text())
        assert "resource_profile" not in man["target"]["not_measured"]
        prof = man["profile"]
        assert prof["source"] == "ssh" and prof["table"] == "profile.parquet" and prof["errors"] == 0, prof
        (h,) = prof["hosts"]
        assert h["end"] == "stdin closed" and h["samples"] >= 3 and abs(h["clock_offset_s"]) < 0.1
        fp = subprocess.run(["ssh-keygen", "-l", "-f", str(tmp / "host.pub")], capture_output=True,
                            text=True, check=True).stdout.split()[1]
        assert h["host_key"] == f"ssh-ed25519 {fp}"

        import pandas as pd

        df = pd.read_parquet(run / "profile.parquet")
        df["component"], df["metric"] = df["component"].astype(str), df["metric"].astype(str)
        assert set(df["site"]) == {1}
        ks_pids = {p for p, c in _cmdlines().items() if "[keystone]" in c}
        assert ks_pids & set(df[df["component"] == "keystone"]["pid"])  # the lab's gunicorns, by pid
        from juice.services.kinds import load_record

        rec = load_record(Path(str(state.load(cloud["name"]).workdir)))  # type: ignore[union-attr]
        db_pids = {int(x["pid"]) for x in (rec or {}).get("servers", [])}  # the cloud's mariadbd
        for comp in ("keystone", "mariadbd"):
            rows = df[df["component"] == comp]
            assert {"cpu_user_s", "cpu_system_s", "rss_bytes", "threads", "fds"} <= set(rows["metric"]), comp
            # the servers' own processes (the host is this machine: other tests' short-lived
            # processes, `test -x .../keystone-manage`, a starting mariadbd, are sampled too)
            own = rows["pid"].isin(ks_pids if comp == "keystone" else db_pids)
            servers = rows[(rows["metric"] == "rss_bytes") & own]
            # a pid now a server's may have been a short-lived process's during the run (pids
            # recycle on a loaded host): most of them, not every one, are servers all along
            peak = servers.groupby("pid")["value"].max()
            assert len(peak) and (peak > 1e6).sum() >= max(1, len(peak) // 2), (comp, peak.to_dict())
        actions = pd.read_parquet(run / "actions.parquet")
        started = actions["started_at"]
        assert df["time"].min() <= started.min() and df["time"].max() >= started.max()
        # stopped by Juice: no ssh client, no remote sampler left (sshd still runs)
        left = [c for c in _cmdlines().values()
                if (c.startswith("ssh ") and str(tmp) in c) or c.startswith(BOOT)]
        assert left == [] and sshd.exited() is None
    finally:
        if fwd is not None:
            fwd.stop(grace_s=2)
        sshd.stop(grace_s=5)
    assert not [c for c in _cmdlines().values() if str(tmp) in c]
