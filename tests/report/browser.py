"""Reports measured in headless Chromium (Debian's ``chromium``, installed by
``scripts/test-deps.sh``): the page's scroll width at a given window width, and the widest
element. The report itself holds no script: a copy gets one that writes the measure into the
DOM, which ``--dump-dom`` prints.

    python -m tests.report.browser report.html [1280]    # "scrollWidth 1280 / client 1280 ..."
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

PROBE = """<script>window.addEventListener("load", () => {
  let m = 0, who = "";
  for (const e of document.querySelectorAll("body *")) {
    const r = e.getBoundingClientRect();
    if (r.width > 0 && r.right > m) { m = r.right; who = e.tagName + "." + (e.className || "") + " "
      + (e.textContent || "").trim().slice(0, 60).replace(/\\s+/g, " "); }
  }
  const p = document.createElement("pre"); p.id = "juice-measure";
  p.textContent = "MEASURE " + document.documentElement.scrollWidth + " "
    + document.documentElement.clientWidth + " " + Math.round(m) + " " + who;
  document.body.appendChild(p);
});</script>"""
_OUT = re.compile(r"MEASURE (\d+) (\d+) (\d+) ([^<]*)")


def chromium() -> str | None:
    """The Chromium executable, or None when it is not installed."""
    return shutil.which("chromium") or shutil.which("chromium-browser")


@dataclass(frozen=True)
class Measure:
    scroll_width: int  # the document's scroll width (> client width: horizontal overflow)
    client_width: int  # the viewport's width
    widest_right: int  # the right edge of the element reaching furthest right
    widest: str  # that element (tag.class and the start of its text)


def measure(html: Path, width: int = 1280, timeout: float = 120) -> Measure:
    exe = chromium()
    if exe is None:
        raise RuntimeError("chromium is not installed (bash scripts/test-deps.sh)")
    with tempfile.TemporaryDirectory() as tmp:
        page = Path(tmp) / "page.html"
        page.write_text(html.read_text().replace("</body>", PROBE + "</body>", 1))
        cp = subprocess.run([exe, "--headless=new", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                             f"--user-data-dir={tmp}/profile", f"--window-size={width},900",
                             "--virtual-time-budget=5000", "--dump-dom", page.as_uri()],
                            capture_output=True, text=True, timeout=timeout, check=False)
    m = _OUT.search(cp.stdout)
    if m is None:
        raise RuntimeError(f"chromium gave no measure (exit {cp.returncode}): {cp.stderr[-500:]}")
    return Measure(int(m.group(1)), int(m.group(2)), int(m.group(3)), m.group(4))


if __name__ == "__main__":
    r = measure(Path(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else 1280)
    print(f"scrollWidth {r.scroll_width} / client {r.client_width}; widest right edge "
          f"{r.widest_right}: {r.widest}")
