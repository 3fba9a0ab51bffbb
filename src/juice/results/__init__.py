"""The results store: one directory per run, written so that a crash never leaves half a run."""
