"""The resource sampler's pure parts on captured /proc text: stat lines, net/dev, names,
settings, and turning cumulative counters into utilisation (no root, no lab)."""

from __future__ import annotations

import pandas as pd
import pytest

from juice.errors import UserError
from juice.onhost import procfs
from juice.profile import dbstats, sampler
from juice.profile.frames import per_component, utilisation
from juice.services.base import services_in

# captured on Debian 12 (a mariadbd and a process whose name holds ") (" and spaces)
STAT_MARIADBD = (
    "4242 (mariadbd) S 1 4242 4242 0 -1 4194560 21789 0 3 0 1234 567 0 0 20 0 38 0 118149 "
    "1586700288 46080 18446744073709551615 1 1 0 0 0 0 0 4096 1260 0 0 0 17 1 0 0 0 0 0 0 0 0 0 0 0 0 0"
)
STAT_ODD = "77 (a) (b c) R 76 77 13384 0 -1 4194304 100 0 0 0 7 3 0 0 20 0 1 0 5000 3133440 394 1 2 3"

NET_DEV_CORE = """\
Inter-|   Receive                                                |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed
    lo:    3193      29    0    0    0     0          0         0     3193      29    0    0    0     0       0          0
    s1: 2941961715  140517    0    0    0     0          0         0  7041617   62622    0    0    0     0       0          0
   s12:     100       2    0    0    0     0          0         0      300       4    0    0    0     0       0          0
  wan0:       5       1    0    0    0     0          0         0        6       1    0    0    0     0       0          0
"""  # noqa: E501 - captured text


def test_stat_line_gives_cpu_seconds_threads_rss_and_start() -> None:
    st = procfs.parse_stat(STAT_MARIADBD.encode(), clk_tck=100, page_size=4096)
    assert (st.pid, st.comm, st.state, st.ppid) == (4242, "mariadbd", "S", 1)
    assert st.user_s == pytest.approx(12.34) and st.system_s == pytest.approx(5.67)
    assert st.threads == 38 and st.start == 118149 and st.rss_bytes == 46080 * 4096


def test_stat_line_with_parentheses_and_spaces_in_the_name() -> None:
    st = procfs.parse_stat(STAT_ODD, clk_tck=100, page_size=4096)
    assert st.comm == "a) (b c" and st.ppid == 76 and st.user_s == pytest.approx(0.07)
    assert st.system_s == pytest.approx(0.03) and st.rss_bytes == 394 * 4096
    with pytest.raises(ValueError):
        procfs.parse_stat("garbage")
    with pytest.raises(ValueError):
        procfs.parse_stat("1 (x) S 1 2")


def test_net_dev_and_the_sites_view_of_core_links() -> None:
    devs = procfs.parse_net_dev(NET_DEV_CORE)
    assert set(devs) == {"lo", "s1", "s12", "wan0"}
    assert devs["s1"] == procfs.NetDev(rx_bytes=2941961715, rx_packets=140517, tx_bytes=7041617,
                                       tx_packets=62622)
    links = procfs.site_links(devs)
    assert set(links) == {1, 12}  # only the core's veths s<k>
    # what the core sends on s12 is what site 12 receives
    assert links[12] == procfs.NetDev(rx_bytes=300, rx_packets=4, tx_bytes=100, tx_packets=2)


def test_component_names_from_command_lines() -> None:
    c = procfs.component_of
    assert c(["/usr/bin/python3", "-m", "juice.driver", "/tmp/job.json"]) == "load-driver"
    assert c(["/opt/juice/native/bin/juice-wan-delay", "--table", "t"]) == "wan-delay"
    assert c(["python3.11", "-u", "-m", "juice.studies.schedulerdb.worker"]) == "schedulerdb.worker"
    assert c(["python3", "-c", "while True: pass"]) == "python"
    assert c(["python3", "/srv/tool.py", "x"]) == "tool"
    assert c(["/usr/bin/memcached", "-p", "11211"]) == "memcached"
    assert c([], "kworker/0:1") == "kworker/0:1"
    assert procfs.parse_cmdline(b"sleep\x00100\x00") == ["sleep", "100"]
    assert procfs.ns_inode("net:[4026532177]") == 4026532177 and procfs.ns_inode("mnt:[1]") is None


def test_mysql_status_to_metrics() -> None:
    m = dbstats.mysql_metrics({"Com_select": "10", "Com_insert": "2", "Com_update": "3",
                               "wsrep_flow_control_paused_ns": "1500000000",
                               "wsrep_flow_control_paused": "0.25"})
    assert m == {"db_reads": 10.0, "db_writes": 5.0, "fc_paused_s": 1.5, "fc_paused": 0.25}
    assert dbstats.mysql_metrics({"Com_select": "1"}) == {"db_reads": 1.0, "db_writes": 0.0}


class _Spec:
    def __init__(self, profile: object) -> None:
        self.profile = profile


def test_settings_from_env_and_spec() -> None:
    assert sampler.settings(object(), env={}) == sampler.Settings()
    assert sampler.settings(_Spec({"interval_s": 0.5}), env={}).interval_s == 0.5
    assert sampler.settings(_Spec({"hz": 10}), env={}).interval_s == pytest.approx(0.1)
    assert not sampler.settings(_Spec({"enabled": False}), env={}).enabled
    env = sampler.settings(_Spec({"hz": 2}), env={"JUICE_PROFILE_HZ": "10"})
    assert env.interval_s == pytest.approx(0.1) and env.source == "JUICE_PROFILE_HZ"
    assert not sampler.settings(None, env={"JUICE_PROFILE_HZ": "off"}).enabled
    for bad in ("20", "abc", "-1"):
        with pytest.raises(UserError, match="JUICE_PROFILE_HZ"):
            sampler.settings(None, env={"JUICE_PROFILE_HZ": bad})
    with pytest.raises(UserError, match="profile"):
        sampler.settings(_Spec({"interval_s": 0.01}), env={})


def test_services_in_finds_records_two_levels_deep() -> None:
    class Svc:
        def records(self) -> list[object]:
            return []

    class Sess:
        def __init__(self) -> None:
            self.svc = Svc()

    class Dep:
        def __init__(self) -> None:
            self.db, self.sess, self.name, self.more = Svc(), Sess(), "x", {"k": Svc()}

    found = services_in(Dep())
    assert len(found) == 3 and all(isinstance(s, Svc) for s in found)


def _profile_rows() -> pd.DataFrame:
    rows = []
    for i, t in enumerate((100.0, 101.0, 102.0)):
        for pid, site in ((10, 1), (11, 1)):  # two keystone processes in site 1
            rows += [("r", t, site, "keystone", pid, "cpu_user_s", 0.5 * i),
                     ("r", t, site, "keystone", pid, "cpu_system_s", 0.25 * i),
                     ("r", t, site, "keystone", pid, "rss_bytes", 1000.0)]
        rows += [("r", t, 1, "link", 0, "net_in_bytes", 1e6 * i),
                 ("r", t, 1, "galera", 20, "db_reads", 100.0 * i),
                 ("r", t, 1, "galera", 20, "db_writes", 10.0 * i),
                 ("r", t, 1, "galera", 20, "fc_paused_s", 0.5 * i)]
    return pd.DataFrame(rows, columns=["run", "time", "site", "component", "pid", "metric", "value"])


def test_utilisation_turns_counters_into_rates_and_sums_per_component() -> None:
    u = utilisation(_profile_rows())
    one = u[(u.pid == 10) & (u.time == 101.0)].set_index("metric")["value"]
    assert one["cpu_pct"] == pytest.approx(75.0) and one["cpu_user_pct"] == pytest.approx(50.0)
    assert one["rss_bytes"] == 1000.0
    assert not ((u.time == 100.0) & (u.metric == "cpu_pct")).any()  # no rate at the first sample
    c = per_component(u).set_index(["time", "component", "metric"])["value"]
    assert c[(102.0, "keystone", "cpu_pct")] == pytest.approx(150.0)  # two processes
    assert c[(101.0, "keystone", "rss_bytes")] == 2000.0
    assert c[(101.0, "link", "net_in_Bps")] == pytest.approx(1e6)
    assert c[(101.0, "galera", "db_statements_s")] == pytest.approx(110.0)
    assert c[(101.0, "galera", "fc_paused_frac")] == pytest.approx(0.5)


def test_peak_table_has_idle_and_a_peak_per_load_level() -> None:
    from juice.profile.report import peak_table

    a, b = _profile_rows(), _profile_rows()
    b["run"] = "s"
    b.loc[b.metric == "cpu_user_s", "value"] *= 4  # the high-load run works harder
    c = per_component(utilisation(pd.concat([a, b], ignore_index=True)))
    t = peak_table(c, {"r": "light", "s": "high"}).set_index("item")
    assert list(t.columns) == ["idle (min)", "light (peak)", "high (peak)"]
    assert t.loc["keystone CPU (% of a core)", "light (peak)"] == pytest.approx(150.0)
    assert t.loc["keystone CPU (% of a core)", "high (peak)"] == pytest.approx(450.0)
    assert t.loc["galera statements/s", "idle (min)"] == pytest.approx(110.0)
