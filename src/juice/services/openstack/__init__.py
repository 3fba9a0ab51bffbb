"""The OpenStack services Juice deploys for real (Keystone, placement, nova's control plane),
the simulated compute nodes, and the named stand-ins (fake-glance, fake-neutron)."""
