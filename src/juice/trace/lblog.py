"""haproxy's own log (``option httplog``): what the load balancer answered and why.

A client that got a 503 or 504 through haproxy cannot tell whether haproxy gave up waiting for
the backend, could not connect to it, queued the request too long or the backend closed the
connection: haproxy's log line says which, in its termination state (``sH--``: the server-side
timeout struck while waiting for the response headers). These lines are read from the run's log
slices (``logs/haproxy-s<site>.log``), with or without a syslog prefix (a real cloud's haproxy
logs through syslog).

    rows = summary(paths)                 # one row per frontend, status and termination state
    lb_verdict(cause, rows)               # what the log says about a failed boot's cause
    table_rows(rows)                      # the report's table: the abnormal answers only

The meanings are haproxy 2.6's (configuration.txt, "Session state at disconnection").
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict

# %ci:%cp [%tr] %ft %b/%s %TR/%Tw/%Tc/%Tr/%Ta %ST %B %CC %CS %tsc %ac/%fc/%bc/%sc/%rc %sq/%bq ... "%r"
HTTPLOG = re.compile(
    r"(?P<client>[0-9a-fA-F.:]+):\d+ \[(?P<date>[^\]]+)\] "
    r"(?P<frontend>\S+) (?P<backend>[^/\s]+)/(?P<server>\S+) "
    r"(?P<TR>-?\d+)/(?P<Tw>-?\d+)/(?P<Tc>-?\d+)/(?P<Tr>-?\d+)/\+?(?P<Ta>-?\d+) (?P<status>-?\d+) \+?\d+ "
    r"\S+ \S+ (?P<term>[-A-Za-z]{4}) \d+/\d+/\d+/\d+/\+?\d+ \d+/\d+\b[^\"]*"
    r"(?:\"(?P<method>[A-Z]+) (?P<uri>\S+))?")

# first character: who or what ended the session
WHO = {"C": "the client aborted", "S": "the server aborted or refused", "P": "haproxy refused it",
       "L": "haproxy answered itself", "R": "haproxy ran out of a resource", "I": "haproxy's internal error",
       "D": "the server was marked down", "U": "a backup server gave way", "K": "an admin killed it",
       "c": "the client-side timeout struck", "s": "the server-side timeout struck", "-": "normal end"}
# second character: where the session was then
WHEN = {"R": "while waiting for the client's request", "Q": "while queued for a connection slot",
        "C": "while connecting to the server", "H": "while waiting for the server's response headers",
        "D": "during the data transfer", "L": "while sending the last data", "T": "while tarpitted",
        "-": ""}
# what governs the frequent abnormal ends
GOVERNS = {
    "sH": "haproxy's timeout server (Debian: 50 s) against the backend's response time (its workers, "
          "the host's CPU): server.haproxy_timeout_server",
    "sC": "haproxy's timeout connect (5 s): the backend not accepting (its listen backlog)",
    "SC": "the backend refused the connection (not listening, or its backlog full)",
    "SH": "the backend closed the connection before answering (a worker killed or timed out)",
    "SD": "the backend closed the connection mid-answer",
    "sQ": "a server's maxconn queue and timeout queue",
    "CH": "the client gave up waiting for the answer (its own timeout)",
    "CD": "the client went away during the answer",
    "cR": "haproxy's timeout client: the client sent no complete request",
    "PR": "haproxy refused the request (a rule or a bad request)",
    "RC": "haproxy ran out of a resource (sockets, source ports, memory)",
}


@dataclass(frozen=True)
class Answer:
    """One request haproxy logged."""

    frontend: str
    server: str
    status: int
    term: str   # the first two characters of the termination state, e.g. "sH", "--"
    ta_ms: int  # total active time (Ta), -1 when unknown
    tr_ms: int  # the server's response time (Tr), -1 when no response came
    method: str
    uri: str


def parse_line(line: str) -> Answer | None:
    """The request an httplog line records (any syslog prefix before it), or None."""
    m = HTTPLOG.search(line)
    if m is None:
        return None
    return Answer(frontend=m["frontend"], server=m["server"], status=int(m["status"]), term=m["term"][:2],
                  ta_ms=int(m["Ta"]), tr_ms=int(m["Tr"]), method=m["method"] or "", uri=m["uri"] or "")


def meaning(term: str) -> str:
    """What a termination state means, in words (``sH`` -> the server-side timeout struck while
    waiting for the server's response headers)."""
    if term[:2] == "--":
        return "normal end"
    who = WHO.get(term[:1], f"ended by {term[:1]!r}")
    when = WHEN.get(term[1:2], "")
    return f"{who} {when}".strip()


def _route(uri: str) -> str:
    """A URI without ids and query (``/v2.1/servers/<id>``), so that requests group."""
    path = uri.split("?", 1)[0]
    return re.sub(r"/[0-9a-fA-F-]{16,}|/\d+(?=/|$)", "/<id>", path)


class LbRow(TypedDict):
    """One group of haproxy's answers (``summary``)."""

    frontend: str
    status: int
    term: str
    request: str
    count: int
    max_s: float
    server: str


def summary(paths: Iterable[Path], max_lines: int = 5_000_000) -> list[LbRow]:
    """One row per (frontend, status, termination state, method and route): count, the largest
    total time (s) and an example server; unreadable files and foreign lines are skipped."""
    groups: dict[tuple[str, int, str, str], LbRow] = {}
    seen = 0
    for path in paths:
        try:
            handle = open(path, errors="replace")  # noqa: SIM115 (closed below)
        except OSError:
            continue
        with handle:
            for line in handle:
                seen += 1
                if seen > max_lines:
                    break
                a = parse_line(line)
                if a is None:
                    continue
                key = (a.frontend, a.status, a.term, f"{a.method} {_route(a.uri)}".strip())
                g = groups.setdefault(key, {"frontend": a.frontend, "status": a.status, "term": a.term,
                                            "request": key[3], "count": 0, "max_s": 0.0, "server": a.server})
                g["count"] += 1
                g["max_s"] = max(g["max_s"], round(a.ta_ms / 1000.0, 3))
    return sorted(groups.values(), key=lambda g: (-g["count"], g["frontend"], g["status"]))


def abnormal(rows: Sequence[LbRow]) -> list[LbRow]:
    """The rows of answers that went wrong: a 5xx, or a session haproxy or a timeout ended."""
    return [r for r in rows if int(r["status"]) >= 500 or r["term"] != "--"]


def table_rows(rows: Sequence[LbRow]) -> list[dict[str, object]]:
    """The report's rows: the abnormal answers by frontend, status and termination state, with
    what the state means and what governs it."""
    return [{"frontend": r["frontend"], "request": r["request"], "status": r["status"],
             "termination": r["term"], "count": r["count"], "longest (s)": r["max_s"],
             "what haproxy saw": meaning(str(r["term"])), "what governs it": GOVERNS.get(str(r["term"]), "")}
            for r in abnormal(rows)]


LB_CAUSES = ("upstream refused or timed out (load balancer or API)",
             "connection refused or reset (load balancer or API not accepting)")


def lb_verdict(cause: str | None, rows: Sequence[LbRow]) -> str | None:
    """What haproxy's log says about a load-balancer cause (None: nothing to add), e.g.
    "haproxy log: 50 x 504 sH (the server-side timeout struck while waiting for the server's
    response headers; longest 50.0 s)"."""
    if cause not in LB_CAUSES:
        return None
    bad = [r for r in abnormal(rows) if int(r["status"]) >= 500]
    if not bad:
        return "haproxy log: no 5xx of its own logged" if rows else None
    by: dict[tuple[int, str], list[LbRow]] = {}
    for r in bad:
        by.setdefault((int(r["status"]), str(r["term"])), []).append(r)
    parts = []
    for (status, term), rs in sorted(by.items(), key=lambda kv: -sum(int(r["count"]) for r in kv[1])):
        n, longest = sum(int(r["count"]) for r in rs), max(float(r["max_s"]) for r in rs)
        parts.append(f"{n} x {status} {term} ({meaning(term)}; longest {longest:g} s)")
    return "haproxy log: " + "; ".join(parts)


def run_logs(run_dir: Path) -> list[Path]:
    """A run's haproxy logs (Juice's slices ``haproxy-s<site>.log``, or a cloud's ``haproxy.log``
    put in ``logs/``; none when the run had no haproxy or kept no logs)."""
    return sorted((run_dir / "logs").glob("haproxy*.log"))
