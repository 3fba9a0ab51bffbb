"""The documentation site (mkdocs.yml, docs/, juice.docsite): it builds with warnings as errors,
every internal link of the built site resolves (page and anchor), every YAML snippet of the
docs and the README that is a full spec plans, and the generated references cover what the
code has. Fast tier: no server; one build per session (~20 s under load, ~7 s idle)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

CLONE = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    from juice.cli.docs import build_site as build

    out = tmp_path_factory.mktemp("site")
    t0 = time.monotonic()
    build(out, strict=True)  # mkdocs.exceptions.Abort on any warning: links, anchors, nav, includes
    print(f"site built in {time.monotonic() - t0:.1f} s")
    yield out


class _Page(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.ids: set[str] = set()
        self.links: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for k, v in attrs:
            if k in ("id", "name") and v:
                self.ids.add(v)
            if v and ((k == "href" and tag in ("a", "link")) or (k == "src" and tag in ("img", "script"))):
                self.links.append(v)


def _parse(path: Path) -> _Page:
    page = _Page()
    page.feed(path.read_text(errors="replace"))
    return page


def _target(site: Path, page: Path, link: str) -> tuple[Path, str] | None:
    """The file and anchor an internal ``link`` of ``page`` points at (None: external)."""
    parts = urlsplit(link)
    if parts.scheme or parts.netloc or link.startswith(("mailto:", "data:")):
        return None
    if not parts.path:
        return page, unquote(parts.fragment)
    base = site if parts.path.startswith("/") else page.parent
    target = (base / unquote(parts.path).lstrip("/")).resolve()
    if target.is_dir() or parts.path.endswith("/"):
        target = target / "index.html"
    return target, unquote(parts.fragment)


def test_the_site_builds_strict_and_every_internal_link_resolves(site: Path) -> None:
    pages = {p.resolve(): _parse(p) for p in site.rglob("*.html")}
    assert len(pages) > 25
    broken = []
    for page, parsed in pages.items():
        for link in parsed.links:
            t = _target(site, page, link)
            if t is None:
                continue
            path, anchor = t
            if not path.exists():
                broken.append(f"{page.relative_to(site)}: {link} (no {path.name})")
            elif anchor and path.suffix == ".html" and anchor not in pages[path].ids:
                broken.append(f"{page.relative_to(site)}: {link} (no #{anchor})")
    assert not broken, "\n".join(broken[:40])


def test_every_yaml_snippet_that_is_a_spec_plans(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from juice.docsite import cli, snippets

    plan = cli.root().commands["plan"]
    found = snippets.snippets(snippets.markdown_files(CLONE))
    specs = [s for s in found if not s.fragment]
    studies_with_a_spec = {s.path.name for s in specs if s.path.parent.name == "studies"}
    assert studies_with_a_spec == {p.name for p in (CLONE / "docs" / "studies").glob("*.md")}
    failed = []
    for i, s in enumerate(specs):
        spec = tmp_path / f"snippet-{i}.yaml"
        spec.write_text(s.text)
        r = CliRunner().invoke(plan, [str(spec), "--results", str(tmp_path / f"results-{i}")])
        if r.exit_code != 0:
            failed.append(f"{s.where()}: {r.exception or r.output.strip()[-300:]} "
                          "(fix it, or mark it '# fragment: <what it is>' on its first line)")
    assert not failed, "\n".join(failed)


def test_the_generated_references_cover_the_code(site: Path) -> None:
    from juice import studies
    from juice.docsite import cli, results

    ref = site / "reference"
    cli_page = (ref / "cli" / "index.html").read_text()
    for path, _cmd in cli.walk(cli.root()):
        assert f'id="{"-".join(path)}"' in cli_page, " ".join(path)
    for name in studies.names():
        page = (ref / f"spec-{name}" / "index.html").read_text()
        assert "<table>" in page and "repetitions" in page, name
    nova = (ref / "spec-nova" / "index.html").read_text()
    assert "computes.isolation" in nova and "provider.static.hosts[].wan_address" in nova
    files = results.scan()
    assert {"manifest.json", "iterations.jsonl", "rally.json", "actions.parquet", "profile.parquet",
            "events.jsonl", "boots.parquet", "messages.parquet", "reads.parquet"} <= set(files)
    report = (ref / "report" / "index.html").read_text()
    for name in studies.names():
        assert f'id="study-{name}"' in report, name
    assert "Resource profiles" in report and "Run order" in report


def test_generated_pages_are_not_committed_and_every_page_is_in_the_nav() -> None:
    import yaml

    from juice.docsite.pages import pages

    generated = set(pages())
    assert not [p for p in generated if (CLONE / "docs" / p).exists()]
    nav = yaml.safe_load((CLONE / "mkdocs.yml").read_text())["nav"]

    def leaves(node: object) -> Iterator[str]:
        if isinstance(node, str):
            yield node
        elif isinstance(node, list):
            for n in node:
                yield from leaves(n)
        elif isinstance(node, dict):
            for v in node.values():
                yield from leaves(v)

    in_nav = set(leaves(nav))
    assert generated <= in_nav
    written = {str(p.relative_to(CLONE / "docs")) for p in (CLONE / "docs").rglob("*.md")}
    assert written <= in_nav, sorted(written - in_nav)


def test_the_readme_is_a_front_page() -> None:
    text = (CLONE / "README.md").read_text()
    assert len(text.splitlines()) <= 200
    assert "bash scripts/quickstart.sh" in text and "bash scripts/test.sh" in text
    for page in ("getting-started.md", "studies/nova.md", "guides/sla-gate.md", "verdicts.md"):
        assert f"docs/{page}" in text, page
