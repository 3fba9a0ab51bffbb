"""OpenStack API clients that the studies and the services share: ``keystone`` (the Keystone
v3 client the load drivers use: tokens, users, projects, rate caps), ``identity`` (Rally's
Keystone scenarios on it), ``contexts`` (Rally's users/tenants contexts), ``nova`` (the compute
API), ``http`` (requests made from inside a lab's site, admin tokens) and ``creds`` (the
deployment's admin credentials and openrc)."""
