# A small flow-size CDF for tests (made up, not published data): sizes 1 kB .. 64 kB.
1000 0.3
8000 0.7
64000 1
