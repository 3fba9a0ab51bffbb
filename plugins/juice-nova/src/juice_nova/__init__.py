"""Juice's code for the OpenStack venv (nova 34): simulated compute hosts.

- ``juice_nova.virt.MultiNodeFakeDriver``: one nova-compute process serving N fake nodes, each
  with the UUID, vCPUs, RAM and disk that Juice wrote in a nodes file (``JUICE_NOVA_NODES``);
- ``juice-nova-compute`` (``juice_nova.compute:main``): nova-compute with that driver loadable
  as ``compute_driver = juice_fake.MultiNodeFakeDriver`` (nova resolves the option inside the
  ``nova.virt`` package only, see ``compute``).
"""
