"""Errors that reach the user as one line and a documented exit code."""

from __future__ import annotations


class JuiceError(Exception):
    """Base class for expected failures: printed as one line, never as a traceback."""

    exit_code = 1


class UserError(JuiceError):
    """Bad input from the user (spec file, flag, site number...): exit code 2.

    The message names the field or file and says how to fix it.
    """

    exit_code = 2


class LabError(JuiceError):
    """The lab could not be built, checked or torn down: exit code 1."""


class ServiceError(JuiceError):
    """A real component (database, broker...) failed to start or answer: exit code 1."""
