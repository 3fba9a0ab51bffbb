"""Rally's KeystoneBasic scenarios on an async Keystone v3 client (see ``scenarios``)."""
