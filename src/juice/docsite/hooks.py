"""The MkDocs hook (``hooks:`` in ``mkdocs.yml``) that adds the generated references to every
build (``juice docs build``, ``mkdocs build``, ``mkdocs serve``): they exist only in the build,
never in ``docs/``, so they cannot drift from the code."""

from __future__ import annotations

from typing import Any

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files


def on_files(files: Files, config: MkDocsConfig, **_: Any) -> Files:
    """Add every page of ``juice.docsite.pages.pages()`` to the build."""
    from juice.docsite.pages import pages

    for path, text in pages().items():
        if files.get_file_from_path(path) is not None:
            raise ValueError(f"docs/{path} is generated: remove it from docs/")
        files.append(File.generated(config, path, content=text))
    return files
