"""Plain HTTP to a Keystone from inside a site (stdlib only; no proxy, no retries).

    r = request(lab, 3, "GET", ks.auth_url(3))                 # GET /v3 from site 3
    token = issue_token(lab, 1, ks.admin_credentials())        # project-scoped admin token
    validate_token(lab, 3, ks.auth_url(3), token)              # 200 when site 3 accepts it

Used by ``services.keystone`` (health checks, the catalog) and tests. A load generator wants
its own pooled async client; this one opens a connection per request.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from juice.errors import ServiceError
from juice.lab.place import Sites
from juice.openstack.creds import AdminCredentials


@dataclass(frozen=True)
class Response:
    status: int
    headers: Mapping[str, str]
    body: bytes

    def json(self) -> Any:  # the decoded body: each caller reads the fields of its own request
        return json.loads(self.body or b"null")


def request(lab: Sites, site: int, method: str, url: str, *, body: object = None,
            headers: Mapping[str, str] | None = None, timeout: float = 30.0) -> Response:
    """One plain HTTP request made from inside ``site`` (so it crosses the emulated WAN), at
    the site's place (a namespace here, an SSH host there). OSError when there is no answer."""
    hdrs = {"Accept": "application/json", **(headers or {})}
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        hdrs["Content-Type"] = "application/json"
    status, got, raw = lab.place(site).request(method, url, data, hdrs, timeout)
    return Response(status, got, raw)


def issue_token(lab: Sites, site: int, creds: AdminCredentials, url: str | None = None) -> str:
    """A project-scoped token for ``creds`` from the Keystone at ``url`` (default: the site's)."""
    body = {"auth": {"identity": {"methods": ["password"], "password": {"user": {
        "name": creds.username, "domain": {"name": creds.user_domain_name},
        "password": creds.password}}},
        "scope": {"project": {"name": creds.project_name, "domain": {"name": creds.project_domain_name}}}}}
    r = request(lab, site, "POST", (url or creds.auth_url(site)) + "/auth/tokens", body=body)
    if r.status != 201 or "x-subject-token" not in r.headers:
        raise ServiceError(f"keystone in site {site}: token request answered {r.status}: {r.body[:200]!r}")
    return r.headers["x-subject-token"]


def validate_token(lab: Sites, site: int, url: str, token: str) -> Response:
    """GET /v3/auth/tokens at ``url`` (a Keystone's /v3) from ``site``, the token checking itself."""
    return request(lab, site, "GET", url + "/auth/tokens",
                   headers={"X-Auth-Token": token, "X-Subject-Token": token})
