"""Small helpers shared by every package: atomic files, processes."""
