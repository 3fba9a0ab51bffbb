"""The CLI reference: every ``juice`` command and option, walked from the click app that
``juice`` itself runs (``juice.cli.app``), so a new option is documented by the build that
follows it."""

from __future__ import annotations

import inspect

import click

from juice.docsite.markdown import cell, code, header, table


def root() -> click.Group:
    """The ``juice`` click group with every command registered, as ``juice.cli.app.main`` has it."""
    import typer

    from juice.cli.app import _register, app

    _register()
    group = typer.main.get_command(app)
    assert isinstance(group, click.Group)
    return group


Path_ = tuple[str, ...]


def walk(group: click.Group, path: Path_ = ("juice",)) -> list[tuple[Path_, click.Command]]:
    """(command path, command) of ``group`` and every command under it, depth first, in the
    order ``--help`` lists them."""
    out: list[tuple[Path_, click.Command]] = [(path, group)]
    ctx = click.Context(group, info_name=path[-1])
    for name in group.list_commands(ctx):
        cmd = group.get_command(ctx, name)
        if cmd is None or cmd.hidden:
            continue
        if isinstance(cmd, click.Group):
            out += walk(cmd, (*path, name))
        else:
            out.append(((*path, name), cmd))
    return out


def _type(p: click.Parameter) -> str:
    t = p.type
    if isinstance(t, click.Choice):
        return " | ".join(str(c) for c in t.choices)
    if isinstance(p, click.Option) and p.is_flag:
        return "flag"
    name = getattr(t, "name", "") or type(t).__name__
    return name.lower() + (" (repeatable)" if p.multiple else "")


def _default(p: click.Parameter) -> str:
    d = p.default
    flag_off = isinstance(p, click.Option) and p.is_flag and d is False
    if callable(d) or d is None or d == [] or d == () or flag_off:
        return ""
    if isinstance(p, click.Option) and p.secondary_opts and isinstance(d, bool):
        return p.opts[0] if d else p.secondary_opts[0]
    return str(d)


def params_table(cmd: click.Command) -> str:
    """One row per argument and option of ``cmd`` (hidden ones left out)."""
    rows = []
    for p in cmd.params:
        if getattr(p, "hidden", False):
            continue
        if isinstance(p, click.Argument):
            name = p.human_readable_name.upper()
            req = "required" if p.required else "optional"
        else:
            name = " / ".join([*p.opts, *p.secondary_opts])
            req = "required" if p.required else ""
        help_text = getattr(p, "help", None) or ""
        rows.append([code(name), cell(_type(p)), code(_default(p)) if _default(p) else "—",
                     cell(" ".join(x for x in (req and f"({req})", help_text) if x))])
    return table(["argument / option", "type", "default", "what"], rows) if rows else "No options.\n"


def _usage(path: tuple[str, ...], cmd: click.Command) -> str:
    ctx = click.Context(cmd, info_name=" ".join(path))
    return " ".join([*path, *cmd.collect_usage_pieces(ctx)])


def page() -> str:
    """The CLI reference page (Markdown)."""
    commands = walk(root())
    intro = ("Every command and option of `juice`, as `juice COMMAND --help` prints them. "
             "Exit status everywhere: 0 success, 1 a run or an SLA criterion failed, 2 bad input "
             "(one line naming the field or option), 130 interrupted (everything the command "
             "created is removed).\n\nCommands: " + ", ".join(
                 f"[`{' '.join(p)}`](#{'-'.join(p)})" for p, _ in commands[1:]) + ".")
    parts = [header("CLI reference", "cli.py", intro, toc=True)]
    for path, cmd in commands:
        title = " ".join(path)
        parts.append(f"## {title} {{#{'-'.join(path)}}}\n")
        parts.append(f"```text\n{_usage(path, cmd)}\n```\n")
        doc = inspect.cleandoc(cmd.help or "")
        if doc:
            parts.append("```text\n" + doc.replace("\b\n", "") + "\n```\n")
        if isinstance(cmd, click.Group):
            ctx = click.Context(cmd, info_name=path[-1])
            subs = [n for n in cmd.list_commands(ctx) if not (c := cmd.get_command(ctx, n)) or not c.hidden]
            links = ", ".join(f"[`{n}`](#{'-'.join((*path, n))})" for n in subs)
            parts.append(f"Subcommands: {links}.\n")
        parts.append(params_table(cmd))
    return "\n".join(parts)
