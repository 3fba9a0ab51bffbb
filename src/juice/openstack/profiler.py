"""OSProfiler's trace headers, made without osprofiler (Juice's venv does not have it).

    trace_id, headers = trace_headers(key)      # a new trace: send headers with the request
    session.post(url, headers={**mine, **headers})

The wire format is osprofiler 4.4's (``osprofiler.web.get_trace_id_headers`` after
``profiler.init(hmac_key)``): ``X-Trace-Info`` is the URL-safe base64 of the JSON
``{"base_id": B, "parent_id": B}`` (a new trace: the parent is the trace itself) and
``X-Trace-HMAC`` its HMAC-SHA1 hex digest under the key the services list in ``[profiler]
hmac_keys``. A service's WSGI middleware that checks the HMAC starts a trace with id B; every
span of it, in every service the request reaches, is stored under B.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import uuid

X_TRACE_INFO = "X-Trace-Info"
X_TRACE_HMAC = "X-Trace-HMAC"


def trace_headers(key: str, trace_id: str | None = None) -> tuple[str, dict[str, str]]:
    """(trace id, the two headers) of a new trace signed with ``key``."""
    if not key:
        raise ValueError("key: OSProfiler ignores traces without an HMAC key")
    base = trace_id or str(uuid.uuid4())
    info = base64.urlsafe_b64encode(json.dumps({"base_id": base, "parent_id": base}).encode())
    mac = hmac.new(key.encode(), info, hashlib.sha1).hexdigest()
    return base, {X_TRACE_INFO: info.decode(), X_TRACE_HMAC: mac}
