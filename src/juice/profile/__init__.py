"""Resource profiles: what every process of a run spends (``sampler`` in a lab, ``ssh`` on an
existing cloud's hosts), stored as ``profile.parquet`` (``table``), read back as pandas frames
(``frames``) and drawn in reports (``report``). The spec section is ``spec.Profile``."""
