"""Load balancers in front of HTTP services: haproxy, with its own log read back."""
