"""Running things on SSH hosts: the host agent (shipped over ssh) and the sessions to it."""
