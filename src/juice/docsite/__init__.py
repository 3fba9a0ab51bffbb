"""The documentation site's generated pages (MkDocs, ``mkdocs.yml`` at the clone's root).

The hand-written pages live in ``docs/``; the references a hand cannot keep in step are made
here from the code itself at every build, never committed, so they cannot drift:

    cli.py       every ``juice`` command and option, walked from the click app
    spec.py      every spec field of every study, from its JSON Schema (``juice schema``)
    results.py   every file a run directory holds, found where the code writes it
    report.py    every report section, found where the code renders its heading
    layout.py    the code layout, from each package's and module's docstring
    pages.py     the generated pages by path (``pages()``)
    hooks.py     the MkDocs hook that adds the generated pages to a build (``mkdocs build`` too)
    snippets.py  the YAML snippets of the docs, and which of them are full specs

``juice docs build [--out DIR]`` (juice.cli.docs) builds the site with warnings as errors.
"""
