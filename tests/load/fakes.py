"""Fake* scenarios: they stand for the OpenStack workloads, which are not under test here.

Drivers resolve them by module path, e.g. ``"tests.load.fakes:FakeSleep"``.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
from pathlib import Path
from typing import Any

from juice.load.api import Context, Env, Iteration


class FakeSleep:
    """Sleeps ``sleep_s`` per iteration inside one atomic action; tracks its concurrency;
    fails iterations whose index is a multiple of ``fail_every`` (0: never)."""

    name = "Fake.sleep"

    def __init__(self, sleep_s: float = 0.001, fail_every: int = 0, pid_file: str = "",
                 cleanup_file: str = "") -> None:
        self.sleep_s = sleep_s
        self.fail_every = fail_every
        self.pid_file = pid_file
        self.cleanup_file = cleanup_file
        self.in_flight = 0
        self.max_in_flight = 0
        self.calls = 0
        self.cleaned = False

    async def setup(self, env: Env) -> Context:
        if self.pid_file:
            Path(self.pid_file).write_text(str(os.getpid()))
        return {"site": env.site}

    async def run(self, it: Iteration) -> None:
        self.calls += 1
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            with it.atomic("fake.sleep"):
                await asyncio.sleep(self.sleep_s)
            if self.fail_every and it.index % self.fail_every == 0:
                raise ValueError(f"fake failure at iteration {it.index}")
        finally:
            self.in_flight -= 1

    async def cleanup(self, env: Env, ctx: Context) -> None:
        self.cleaned = True
        if self.cleanup_file:
            Path(self.cleanup_file).write_text("cleaned")


class FakeNested:
    """Two levels of atomic actions: outer > (inner.a, inner.b); idle time between them."""

    name = "Fake.nested"

    def __init__(self, idle_s: float = 0.0) -> None:
        self.idle_s = idle_s

    async def setup(self, env: Env) -> Context:
        return {}

    async def run(self, it: Iteration) -> None:
        with it.atomic("outer"):
            with it.atomic("inner.a"):
                await asyncio.sleep(0)
            with it.atomic("inner.b"):
                await asyncio.sleep(0)
        if self.idle_s:
            await it.sleep_between(self.idle_s)

    async def cleanup(self, env: Env, ctx: Context) -> None:
        pass


class FakeCrash:
    """Kills its own driver process (exit code 3) at the first iteration."""

    name = "Fake.crash"

    async def setup(self, env: Env) -> Context:
        return {}

    async def run(self, it: Iteration) -> None:
        print("fake crash: about to die", flush=True)
        os._exit(3)

    async def cleanup(self, env: Env, ctx: Context) -> None:
        pass


class FakeWhereAmI:
    """Records, in ``out_dir/site-<n>.json``, the network namespace it runs in and whether it
    can bind ``env["bind_ip"]`` (only possible inside that site's namespace)."""

    name = "Fake.where_am_i"

    def __init__(self, out_dir: str) -> None:
        self.out_dir = out_dir

    async def setup(self, env: Env) -> Context:
        bound = ""
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            try:
                s.bind((str(env.get("bind_ip")), 0))
                bound = s.getsockname()[0]
            except OSError as e:
                bound = f"error: {e}"
        info: dict[str, Any] = {"netns": os.readlink("/proc/self/ns/net"), "bound": bound,
                                "pid": os.getpid()}
        Path(self.out_dir, f"site-{env.site}.json").write_text(json.dumps(info))
        return {}

    async def run(self, it: Iteration) -> None:
        with it.atomic("fake.noop"):
            await asyncio.sleep(0)

    async def cleanup(self, env: Env, ctx: Context) -> None:
        pass
