"""The databases Juice deploys (MariaDB, Galera, PostgreSQL, CockroachDB) and what is read
from them around a run: statement counters, attribution, the servers' own error records."""
