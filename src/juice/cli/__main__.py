"""``python -m juice.cli``."""
from juice.cli.app import main

main()
