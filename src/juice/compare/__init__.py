"""``juice compare``: what differs between result sets (``metadata``) and whether their
measurements do (``deltas``)."""
