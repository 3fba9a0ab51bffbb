"""What every study's spec shares: the strict pydantic base, the name pattern, reading YAML."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict

from juice.errors import UserError

NAME_RE = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)



def read_yaml(path: Path) -> dict[str, Any]:
    """The mapping in a YAML spec file, or a one-line UserError."""
    try:
        data = yaml.safe_load(path.read_text())
    except FileNotFoundError:
        raise UserError(f"{path}: no such spec file (see examples/ for specs to start from)") from None
    except IsADirectoryError:
        raise UserError(f"{path}: is a directory, expected a YAML spec file") from None
    except yaml.YAMLError as e:
        raise UserError(f"{path}: not valid YAML ({str(e).splitlines()[0]})") from None
    if not isinstance(data, dict):
        raise UserError(f"{path}: expected a mapping of keys (name, rdbms, sites, ...)")
    return data


