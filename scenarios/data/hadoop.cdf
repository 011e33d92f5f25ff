# Hadoop flow sizes: the Facebook Hadoop cluster of A. Roy et al., "Inside the Social
# Network's (Datacenter) Network", SIGCOMM 2015, as used by the HPCC evaluation (where it is
# called FB_Hadoop). Mostly small flows: half are at most 700 bytes.
#
# Format (scenarios/data/*.cdf): lines starting with '#' are comments; every other line is
# `size_bytes cum_prob`: the fraction of flows no larger than size_bytes. Sizes increase,
# cum_prob never decreases and the last is 1. Between two points sizes are uniform (the CDF
# is linear), as in HPCC's traffic generator, so the mean flow size is
# sum((s[i-1] + s[i]) / 2 * (p[i] - p[i-1])) = 120421 bytes.
#
# Where the points come from: the HPCC repository (Li et al., SIGCOMM 2019,
# github.com/alibaba-edu/High-Precision-Congestion-Control) ships this distribution as
# traffic_gen/FbHdp_distribution.txt, a piecewise-linear CDF with the probability in percent; the
# points below are those, with the percentages divided by 100. They are published data,
# re-typed here in our format; no code was taken.
0 0
100 0.01
200 0.02
300 0.05
350 0.15
400 0.2
500 0.3
600 0.4
700 0.5
1000 0.6
2000 0.67
7000 0.7
30000 0.72
50000 0.82
80000 0.87
120000 0.9
300000 0.95
1000000 0.975
2000000 0.99
10000000 1
