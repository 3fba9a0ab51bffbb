"""The ``juice`` command: ``app`` holds the click app and ``main``; each verb group is a module beside it
(``run``, ``lab``, ``db``, ``hosts``, ``keystone``, ``trace``, ``analyze``, ``compare``, ``trend``,
``calibrate``, ``sla``, ``schema``, ``export``; ``common`` holds what they share)."""


def main() -> None:
    """The console script's entry (kept here so an install made before the CLI became a package
    still starts)."""
    from juice.cli.app import main as run
    run()
