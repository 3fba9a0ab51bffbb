"""Causes of failures, named from the services' own error messages (seed 004, Table 1:
component, error, count, cause), and tied to the database's own counters (issue 28).

A message template (``parse.template_of``) is matched against ``CAUSES``, the failure modes the
seeds report and the ones Juice's faults and simulation produce; the first match names the
cause and the knob that governs it. Unknown templates keep no cause (``None``): they are listed,
never guessed. A failed boot's cause is its terminal fault's, else the first error line of the
boot (same request ids) that names one.

The database counters of the run (``server_events`` in the manifest, ``services.dbevents``)
confirm or refine a cause: "Deadlock found" lines come from InnoDB deadlocks or from Galera
certification failures / brute-force aborts, and only the counters tell which.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from juice.util.jsontypes import as_object, get_in

DOWN = "compute services seen as down (their heartbeats late)"
# (pattern on the template or message, cause, what governs it)
CAUSES: tuple[tuple[re.Pattern[str], str, str], ...] = tuple((re.compile(p, re.I), c, k) for p, c, k in (
    (r"QueuePool limit of size .* overflow .* reached", "database connection pool exhausted",
     "[database] max_pool_size / max_overflow (seed 002: 5 → 100)"),
    (r"Too many connections|max_connections", "database refused connections (max_connections)",
     "MariaDB max_connections (shipped 151)"),
    (r"Deadlock found when trying to get lock|DBDeadlock|deadlock detected",
     "database deadlock or Galera certification conflict",
     "writers per row: Galera multi-writer (seed 004), retries (oslo.db wrap_db_retry)"),
    (r"Lock wait timeout exceeded", "database lock wait timeout", "innodb_lock_wait_timeout, contention"),
    (r"MessagingTimeout|Timed out waiting for a reply", "RPC timeout",
     "[DEFAULT] rpc_response_timeout, a slow or cut-off consumer"),
    (r"AMQP server .* is unreachable|Connection refused.*5672|AMQPConnectionError|"
     r"Unable to connect to AMQP server", "message bus unreachable", "RabbitMQ availability, partitions"),
    (r"Lost connection to (MySQL|MariaDB) server|server has gone away|Can't connect to (MySQL|MariaDB)",
     "database connection lost", "database availability, partitions, wait_timeout"),
    (r"has not been heard from in a while|is (down|not up)\b.*service", DOWN,
     "[DEFAULT] service_down_time (60 s) against report_interval (10 s): a heartbeat goes through "
     "nova-conductor and the database, late when they are overloaded"),
    (r"No valid host was found", "no capacity for the request (scheduler)",
     "capacity, filters, placement allocation candidates"),
    (r"Exceeded maximum number of retries", "retries exhausted", "[scheduler] max_attempts"),
    (r"Not authorized for image", "image not authorized (glance refused the token)",
     "glance-api's keystonemiddleware validating the user's token against Keystone (seed 004: token "
     "validation timing out under load, 845 boots): Keystone's workers and cache, glance-api's workers"),
    (r"Error contacting glance server|GlanceConnectionFailed|Image .* could not be found|ImageNotFound",
     "image service error",
     "glance-api's availability and workers (SIMULATED with image_service: fake-glance)"),
    (r"Failed to allocate the network|VirtualInterfaceCreateException|network-vif-plugged.*[Tt]imeout|"
     r"Timeout waiting for \[\('network-vif-plugged",
     "network-vif-plugged not received in time (port not up)",
     "[DEFAULT] vif_plugging_timeout (300 s) against neutron's port activation: its API workers, the "
     "OVN northd/SB path, the nova notifier's batching (send_events_interval 2 s), and nova-api's "
     "workers (the event arrives through POST /os-server-external-events)"),
    (r"Error creating port|NeutronError|PortBindingFailed|binding_failed", "network service error",
     "neutron's API workers and database (SIMULATED with network_service: fake-neutron)"),
    (r"injected (build|spawn) failure|Instance failed to spawn|failed to spawn", "spawn failed on the node",
     "the hypervisor (SIMULATED here: failures.spawn / failing_nodes)"),
    (r"Service Unavailable|Gateway Time-?out|\b50[34]\b|No server is available",
     "upstream refused or timed out (load balancer or API)",
     "haproxy's timeout server (504: the API answered too late) or a connect/queue limit (503), the "
     "API's workers and CPU: haproxy's own log says which (its termination state)"),
    (r"Unable to establish connection to .*:5000|Authorization failed|ConnectFailure.*keystone",
     "identity service unreachable or refusing", "Keystone workers, its cache, availability"),
    (r"Cannot connect to host|Connect call failed|Connection reset by peer|Connection refused",
     "connection refused or reset (load balancer or API not accepting)",
     "haproxy maxconn and the listen backlog behind it, API availability"),
    (r"Timed out|timed out", "timeout (other)", "the call's own timeout"),
))


def cause_of(text: str | None) -> tuple[str, str] | None:
    """(cause, what governs it) of an error template or message; None when none applies."""
    if not text:
        return None
    for pattern, cause, knob in CAUSES:
        if pattern.search(text):
            return cause, knob
    return None


GENERIC = ("retries exhausted", "timeout (other)")  # what a more specific cause explains
# an outcome and the causes among the boot's own lines that say why (no valid host: the
# scheduler's filter found the nodes' services down)
REFINED_BY = {"no capacity for the request (scheduler)": (DOWN,)}


def boot_cause(fault_template: str | None, fault: str | None,
               error_templates: Iterable[str | None]) -> str | None:
    """A failed boot's cause: its terminal fault's, else the first of its error lines that names
    one — but a generic one (retries exhausted) gives way to the specific cause of the attempts
    (e.g. the spawn failures that used the retries up), and an outcome to the line that says why
    (``REFINED_BY``: no valid host because the nodes' services were seen down)."""
    found = [c[0] for c in map(cause_of, (fault_template, fault, *error_templates)) if c]
    specific = [c for c in found if c not in GENERIC]
    best = specific or found
    if not best:
        return None
    why = [c for c in REFINED_BY.get(best[0], ()) if c in found]
    return why[0] if why else best[0]


def _count(db: Mapping[str, object], key: str) -> int:
    v = db.get(key, 0)
    return int(v) if isinstance(v, int | float | str) else 0


def db_verdict(cause: str | None, db: Mapping[str, object] | None) -> str | None:
    """What the database's counters over the run say about ``cause`` (None: nothing to add)."""
    if not db:
        return None
    dead, cert = _count(db, "Innodb_deadlocks"), _count(db, "wsrep_local_cert_failures")
    bf, refused = _count(db, "wsrep_local_bf_aborts"), _count(db, "Connection_errors_max_connections")
    if cause == "database deadlock or Galera certification conflict":
        counted = ((dead, "InnoDB deadlock(s)"), (cert, "certification failure(s)"),
                   (bf, "brute-force abort(s)"))
        parts = [f"{n} {what}" for n, what in counted if n]
        return "database counters: " + (", ".join(parts) if parts else "no deadlock or conflict counted")
    if cause == "database refused connections (max_connections)":
        peak, limit = db.get("Max_used_connections"), db.get("max_connections")
        return f"database counters: {refused} refused, peak {peak} of max_connections {limit}"
    return None


def server_counters_table(manifests: Iterable[tuple[str, Mapping[str, object]]]) -> list[dict[str, object]]:
    """One row per run with database event counters (``server_events.database``) that are not all 0."""
    rows: list[dict[str, object]] = []
    for run, man in manifests:
        db = as_object(get_in(man, "server_events", "database"))
        if not db:
            continue
        rows.append({"run": run, **{k: db.get(k) for k in (
            "Innodb_deadlocks", "wsrep_local_cert_failures", "wsrep_local_bf_aborts",
            "Connection_errors_max_connections", "Aborted_connects", "Max_used_connections",
            "max_connections") if k in db}})
    return rows
