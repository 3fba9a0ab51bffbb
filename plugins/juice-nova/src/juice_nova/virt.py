"""A multi-node fake virt driver: one nova-compute process, N simulated compute nodes.

nova's own ``nova.virt.fake.FakeDriver`` serves one node per process, with a node UUID drawn at
random per process (``uuidsentinel``) and one resource pool shared by all its nodes. This driver
keeps FakeDriver's instance handling (spawn is immediate: no image, no disk, no guest) and
changes what a study needs:

- the nodes come from ``<state_path>/juice-nodes.json``, written by Juice (``render_nodes`` in
  ``juice.services.openstack.nova_conf``)::

      {"host": "juice-c1", "nodes": [{"name": "juice-c1-n0000", "uuid": "...", "vcpus": 2,
                                      "memory_mb": 2048, "disk_gb": 20}, ...]}

  so node UUIDs are deterministic (Juice computes uuid5 of host and node name) and a restarted
  process meets its own compute node records;
- every node reports its own vCPUs / RAM / disk, to nova (``get_available_resource``) and to
  placement (``update_provider_tree``), and spawn/destroy count usage per node: capacity is
  exact (with ``reserved_host_*`` = 0 and allocation ratios 1.0 in nova.conf);
- SIMULATED waits (issue 28): the file's optional ``"simulation"`` entry, ``{"spawn_time":
  <distribution>, "spawn_failure": p, "seed": n}``, makes spawn sleep the time drawn for the
  instance (``simwait.draw``: the same per (seed, instance uuid)) while nova's build slot is
  held (``max_concurrent_builds`` fills as with real hypervisors), then fail with probability p
  per (instance, node) the way ``failing_nodes`` does (nova reschedules);
- the image (issue 40): with the file's optional ``"image": {"download": "node_cache"}``, a node
  downloads the instance's image through glance-api the first time it boots it, as nova's
  libvirt driver does with local disks: ``nova.virt.images.fetch`` (``IMAGE_API.download`` with
  the request's context: the user's token, validated by glance against Keystone) into the node's
  image cache (``<instances_path>/_base/<node>/<sha1 of the image id>``, written as ``.part``
  then renamed; one download at a time per file under oslo.concurrency's external lock, as
  libvirt's ``fetch_func_sync``); later boots of the image on that node use the copy. Each
  fetch logs ``juice-fake: image <id> fetched from glance in X seconds (N bytes) on node <n>``
  (or ``... found in the image cache of node <n>``) with the instance: the trace's image phase;
- a simulated hypervisor keeps its guests: an instance that nova's database places on one of
  this process's nodes (ACTIVE or stopped) but that the driver does not hold — booted before
  this process restarted, or preloaded as rows (``juice.services.openstack.nova_preload``) — is adopted
  (running or shut off, its resources counted) the first time nova asks about it, as a real
  hypervisor would still be running it. FakeDriver alone answers "not found", and nova's power
  sync then marks the instance NOSTATE.

- the network (issue 40): with the file's optional ``"ovn"`` entry (``{"sb": "tcp:IP:6642",
  "ip": IP}``, a deployment with real Neutron on ML2/OVN), the process plays its hosts'
  ovn-controller (``juice_nova.ovn.Chassis``: a chassis per nova service host in OVN's southbound
  database), and spawn does what nova's libvirt driver does in ``_create_guest_with_network``
  (nova 34, virt_type kvm): it plans to wait for ``network-vif-plugged`` of every VIF that is not
  active yet, plugs the VIFs (here: the simulated ovn-controller claims their ports), and waits
  up to ``[DEFAULT] vif_plugging_timeout`` (nova's default, 300 s) for neutron's events; at the
  timeout with ``vif_plugging_is_fatal`` (default true) the VIFs are unplugged and
  ``VirtualInterfaceCreateException`` is raised: nova's "Failed to allocate the network(s), not
  rescheduling". The simulated spawn time comes BEFORE this wait (libvirt's image and disk
  preparation precede it). destroy unplugs the VIFs (the claims released).
- with the file's optional ``"ovs"`` entry instead (``{"transport_url": ..., "report_interval": 30,
  "bridge_mappings": {...}, "tunnel_types": [...]}``, real Neutron on ML2/OVS), the process plays
  its hosts' neutron-openvswitch-agent (``juice_nova.ovs.Agent``: state reports and device RPCs
  over RabbitMQ); a plugged VIF is reported up by it, the rest of the spawn is the same.

Loaded by ``juice-nova-compute`` (``juice_nova.compute``) as ``juice_fake.MultiNodeFakeDriver``.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from typing import Any

import nova.conf
from nova import exception
from nova.compute import power_state, vm_states
from nova.virt import fake, images
from oslo_concurrency import lockutils
from oslo_log import log as logging

CONF = nova.conf.CONF
LOG = logging.getLogger(__name__)
NODES_FILE = "juice-nodes.json"
# the vm_states a guest a simulated hypervisor keeps running (or shut off) is adopted in
ADOPTED_STATES = {vm_states.ACTIVE: power_state.RUNNING, vm_states.STOPPED: power_state.SHUTDOWN}


def load_simulation(path: str) -> dict[str, Any]:
    """The ``simulation`` entry of ``path`` ({} when absent: files written before it)."""
    with open(path) as f:
        sim: dict[str, Any] = json.load(f).get("simulation") or {}
    return sim


def load_image(path: str) -> dict[str, Any]:
    """The ``image`` entry of ``path`` ({} when absent: no download)."""
    with open(path) as f:
        image: dict[str, Any] = json.load(f).get("image") or {}
    return image


def cache_path(node: str, image_id: str) -> str:
    """Where node ``node`` keeps its copy of image ``image_id`` (libvirt's _base file name:
    ``nova.virt.libvirt.imagecache.get_cache_fname``, in a directory per simulated node)."""
    return os.path.join(CONF.instances_path, "_base", node, hashlib.sha1(image_id.encode()).hexdigest())


def _simwait() -> Any:
    """The draws' module: shipped beside this one (juice_nova/simwait.py), else Juice's."""
    try:
        from juice_nova import simwait  # type: ignore[attr-defined]
    except ImportError:
        from juice.services.openstack import simwait
    return simwait


def load_ovn(path: str) -> dict[str, Any]:
    """The ``ovn`` entry of ``path`` ({} without one: no simulated ovn-controller)."""
    with open(path) as f:
        ovn: dict[str, Any] = json.load(f).get("ovn") or {}
    return ovn


def load_ovs(path: str) -> dict[str, Any]:
    """The ``ovs`` entry of ``path`` ({} without one: no simulated neutron-openvswitch-agent)."""
    with open(path) as f:
        ovs: dict[str, Any] = json.load(f).get("ovs") or {}
    return ovs


def load_nodes(path: str, host: str) -> list[dict[str, Any]]:
    """The nodes listed for ``host`` in ``path`` (InvalidConfiguration when they do not fit)."""
    try:
        with open(path) as f:
            data = json.load(f)
    except (OSError, ValueError) as e:
        raise exception.InvalidConfiguration(f"juice fake driver: cannot read {path}: {e}") from e
    if data.get("host") != host:
        raise exception.InvalidConfiguration(
            f"juice fake driver: {path} lists nodes of host {data.get('host')!r}, "
            f"but this service's [DEFAULT] host is {host!r}")
    nodes: list[dict[str, Any]] = data["nodes"]
    if not nodes:
        raise exception.InvalidConfiguration(f"juice fake driver: {path} lists no node")
    return nodes


class MultiNodeFakeDriver(fake.FakeDriver):  # type: ignore[misc]
    """FakeDriver serving the nodes of ``<state_path>/juice-nodes.json`` (see the module doc)."""

    def __init__(self, virtapi: Any, read_only: bool = False) -> None:
        super().__init__(virtapi, read_only)
        path = os.path.join(CONF.state_path, NODES_FILE)
        self.node_specs = {n["name"]: n for n in load_nodes(path, CONF.host)}
        self.node_resources = {
            name: fake.Resources(vcpus=n["vcpus"], memory_mb=n["memory_mb"], local_gb=n["disk_gb"])
            for name, n in self.node_specs.items()}
        self.instance_node: dict[str, str] = {}
        self.simulation = load_simulation(path)
        self.image = load_image(path)
        self.ovn = load_ovn(path)
        self.ovs = load_ovs(path)
        # the hosts' simulated network agent once init_host has run: juice_nova.ovn.Chassis
        # (ML2/OVN) or juice_nova.ovs.Agent (ML2/OVS); both plug(port, host) and unplug(port, host)
        self.chassis: Any = None

    def init_host(self, host: str) -> None:
        self._host = host
        self._set_nodes(list(self.node_specs))
        if self.ovn:  # in the process that serves (a forked child: after the fork)
            from juice_nova.ovn import Chassis

            self.chassis = Chassis(self.ovn["sb"], self.ovn["ip"], [host]).start()
        elif self.ovs:
            from juice_nova.ovs import Agent

            self.chassis = Agent(self.ovs["transport_url"], [host],
                                 report_interval=float(self.ovs.get("report_interval", 30.0)),
                                 bridge_mappings=self.ovs.get("bridge_mappings") or {},
                                 tunnel_types=self.ovs.get("tunnel_types") or ["vxlan"]).start()

    def get_nodenames_by_uuid(self, refresh: bool = False) -> dict[str, str]:
        return {n["uuid"]: name for name, n in self.node_specs.items()}

    def get_available_resource(self, nodename: str) -> dict[str, Any]:
        status: dict[str, Any] = super().get_available_resource(nodename)
        if not status:
            return status
        status.update(self.node_resources[nodename].dump())
        status["uuid"] = self.node_specs[nodename]["uuid"]
        return status

    def update_provider_tree(self, provider_tree: Any, nodename: str,
                             allocations: Any = None) -> None:
        res = self.node_resources[nodename]
        inv = provider_tree.data(nodename).inventory
        ratios = self._get_allocation_ratios(inv)
        reserved = {"VCPU": CONF.reserved_host_cpus, "MEMORY_MB": CONF.reserved_host_memory_mb,
                    "DISK_GB": self._get_reserved_host_disk_gb_from_config()}
        totals = {"VCPU": res.vcpus, "MEMORY_MB": res.memory_mb, "DISK_GB": res.local_gb}
        provider_tree.update_inventory(nodename, {
            rc: {"total": total, "min_unit": 1, "max_unit": total, "step_size": 1,
                 "allocation_ratio": ratios[rc], "reserved": reserved[rc]}
            for rc, total in totals.items()})

    def spawn(self, context: Any, instance: Any, image_meta: Any, injected_files: Any,
              admin_password: Any, allocations: Any, network_info: Any = None,
              block_device_info: Any = None, power_on: bool = True, accel_info: Any = None) -> None:
        if self.node_specs.get(instance.node, {}).get("fail_builds"):
            # injected (computes.failing_nodes): nova's compute manager turns it into a reschedule
            raise RuntimeError(f"juice-fake: injected build failure on node {instance.node}")
        self._fetch_image(context, instance)
        self._simulated_spawn(instance)
        self._create_guest_with_network(instance, network_info or [], power_on)
        super().spawn(context, instance, image_meta, injected_files, admin_password, allocations,
                      network_info, block_device_info, power_on, accel_info)
        res = self.node_resources.get(instance.node)
        if res is not None:
            f = instance.flavor
            res.claim(vcpus=f.vcpus, mem=f.memory_mb, disk=f.root_gb)
            self.instance_node[instance.uuid] = instance.node

    def _fetch_image(self, context: Any, instance: Any) -> None:
        """The node's copy of the instance's image: downloaded through glance-api the first time
        (see the module doc), else found in the node's cache."""
        image_id = instance.image_ref
        if self.image.get("download") != "node_cache" or not image_id:
            return
        path = cache_path(instance.node, image_id)
        base = os.path.dirname(path)
        os.makedirs(base, exist_ok=True)
        LOG.info("juice-fake: image %s wanted on node %s", image_id, instance.node, instance=instance)
        with lockutils.lock(os.path.basename(path), external=True, lock_path=os.path.join(base, "locks")):
            if os.path.exists(path):
                LOG.info("juice-fake: image %s found in the image cache of node %s", image_id,
                         instance.node, instance=instance)
                return
            t0 = time.monotonic()
            images.fetch(context, image_id, path + ".part")
            os.replace(path + ".part", path)
            LOG.info("juice-fake: image %s fetched from glance in %.3f seconds (%d bytes) on node %s",
                     image_id, time.monotonic() - t0, os.path.getsize(path), instance.node,
                     instance=instance)

    def _create_guest_with_network(self, instance: Any, network_info: Any, power_on: bool) -> None:
        """nova 34 libvirt's ``_create_guest_with_network`` for virt_type kvm, without the guest:
        wait for ``network-vif-plugged`` of the VIFs not active yet while plugging them."""
        if self.chassis is None:
            return
        timeout = CONF.vif_plugging_timeout
        events = self._get_neutron_events(network_info) if power_on and timeout else []
        t0 = time.monotonic()
        try:
            with self.virtapi.wait_for_instance_event(instance, events, timeout=timeout,
                                                      error_callback=self._neutron_failed_callback):
                self.plug_vifs(instance, network_info)
            if events:  # the trace's vif-plugged wait
                LOG.info("juice-fake: %s received in %.3f seconds on node %s",
                         ", ".join(f"{n}-{t}" for n, t in events), time.monotonic() - t0, instance.node,
                         instance=instance)
        except exception.InstanceEventTimeout as e:
            # nova logged the timeout; whether it is fatal is nova's setting
            if CONF.vif_plugging_is_fatal:
                self.unplug_vifs(instance, network_info)
                raise exception.VirtualInterfaceCreateException() from e
        except Exception:
            self.unplug_vifs(instance, network_info)
            raise

    @staticmethod
    def _get_neutron_events(network_info: Any) -> list[tuple[str, str]]:
        # libvirt's: the VIFs that are down now, for which a down->up event is expected
        return [("network-vif-plugged", vif["id"]) for vif in network_info
                if vif.get("active", True) is False and vif["vnic_type"] != "remote-managed"]

    @staticmethod
    def _neutron_failed_callback(event_name: str, instance: Any) -> None:
        LOG.error("Neutron Reported failure on event %(event)s for instance %(uuid)s",
                  {"event": event_name, "uuid": instance.uuid}, instance=instance)
        if CONF.vif_plugging_is_fatal:
            raise exception.VirtualInterfaceCreateException()

    def plug_vifs(self, instance: Any, network_info: Any) -> None:
        """The VIFs appear on the host's bridge: its simulated ovn-controller claims the ports
        (ML2/OVS: its simulated agent reports them up)."""
        if self.chassis is not None:
            for vif in network_info or []:
                self.chassis.plug(vif["id"], instance.host or CONF.host)

    def unplug_vifs(self, instance: Any, network_info: Any) -> None:
        if self.chassis is not None:
            for vif in network_info or []:
                self.chassis.unplug(vif["id"], instance.host or CONF.host)

    def _simulated_spawn(self, instance: Any) -> None:
        """Sleep the simulated spawn time, then maybe fail (injected; see the module doc)."""
        sim = self.simulation
        if not sim:
            return
        sw, seed = _simwait(), int(sim.get("seed", 1))
        if sim.get("spawn_time"):
            time.sleep(sw.draw(sim["spawn_time"], "spawn", instance.uuid, seed))
        p = float(sim.get("spawn_failure", 0.0))
        if p and sw.fails(p, seed, "spawn", f"{instance.uuid}/{instance.node}"):
            raise RuntimeError(f"juice-fake: injected spawn failure on node {instance.node} "
                               f"(simulated, failures.spawn = {p:g})")

    def _adopt(self, instance: Any) -> None:
        """Hold ``instance`` if nova placed it on one of these nodes and the driver does not
        have it yet (see the module doc); anything else is left to FakeDriver."""
        state = ADOPTED_STATES.get(instance.vm_state)
        if (instance.uuid in self.instances or state is None or instance.host != CONF.host
                or instance.node not in self.node_resources):
            return
        f = instance.flavor
        self.instances[instance.uuid] = fake.FakeInstance(instance.name, state, instance.uuid)
        self.resources.claim(vcpus=f.vcpus, mem=f.memory_mb, disk=f.root_gb)
        self.node_resources[instance.node].claim(vcpus=f.vcpus, mem=f.memory_mb, disk=f.root_gb)
        self.instance_node[instance.uuid] = instance.node

    def get_info(self, instance: Any, use_cache: bool = True) -> Any:
        self._adopt(instance)
        return super().get_info(instance, use_cache)

    def power_off(self, instance: Any, *args: Any, **kwargs: Any) -> None:
        self._adopt(instance)
        super().power_off(instance, *args, **kwargs)

    def power_on(self, context: Any, instance: Any, *args: Any, **kwargs: Any) -> None:
        self._adopt(instance)
        super().power_on(context, instance, *args, **kwargs)

    def destroy(self, context: Any, instance: Any, network_info: Any, block_device_info: Any = None,
                destroy_disks: bool = True, destroy_secrets: bool = True) -> None:
        self._adopt(instance)
        super().destroy(context, instance, network_info, block_device_info, destroy_disks,
                        destroy_secrets)
        self.unplug_vifs(instance, network_info)  # libvirt's cleanup unplugs the VIFs
        node = self.instance_node.pop(instance.uuid, None)
        if node is not None:
            f = instance.flavor
            self.node_resources[node].release(vcpus=f.vcpus, mem=f.memory_mb, disk=f.root_gb)
