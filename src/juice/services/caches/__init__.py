"""The caches Juice deploys beside OpenStack services: memcached and Redis."""
